// A C++ struct bound as a read-only Python record: each field declared once, in the struct,
// and named once here (def_readonly or a computed property), so the generated _core.pyi,
// to_dict() and record["field"] all follow from the binding instead of hand-kept dicts.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace clgpu::python {

namespace detail {

// Records inside a record (a list of them) become dicts too; tuples become lists (JSON's form).
inline pybind11::object Plain(const pybind11::handle& v) {
  namespace py = pybind11;
  if (py::hasattr(v, "to_dict") && !py::isinstance<py::type>(v)) return v.attr("to_dict")();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    py::list out;
    for (const py::handle& x : v) out.append(Plain(x));
    return std::move(out);
  }
  return py::reinterpret_borrow<py::object>(v);
}

}  // namespace detail

template <class T, class... Base>
class Record {
 public:
  Record(pybind11::module_& m, const char* name, const char* doc)
      : cls_(m, name, doc), names_(std::make_shared<std::vector<std::string>>()) {}
  // Inherits the base record's fields (pybind11 gives the properties; to_dict() needs the names).
  template <class B>
  Record(pybind11::module_& m, const char* name, const char* doc, const Record<B>& base)
      : cls_(m, name, doc), names_(std::make_shared<std::vector<std::string>>(base.names())) {}

  // `member` may be a base struct's (C a base of T).
  template <class F, class C>
  Record& field(const char* name, F C::*member, const char* doc = "") {
    cls_.def_readonly(name, member, doc);
    names_->push_back(name);
    return *this;
  }
  // A value derived from the struct (a unit conversion, a sum, a nested struct's field).
  template <class Getter>
  Record& computed(const char* name, Getter get, const char* doc = "") {
    cls_.def_property_readonly(name, get, doc);
    names_->push_back(name);
    return *this;
  }
  const std::vector<std::string>& names() const { return *names_; }

  // to_dict(), record["field"], keys(), == (by value), repr: what the frozen dataclasses these
  // replaced offered, so callers keep reading records either way.
  pybind11::class_<T, Base...>& done() {
    namespace py = pybind11;
    auto names = names_;
    cls_.def(
        "to_dict",
        [names](const py::object& self) {
          py::typing::Dict<py::str, py::object> d;
          for (const std::string& n : *names) d[py::str(n)] = detail::Plain(self.attr(n.c_str()));
          return d;
        },
        "The record as a dict of plain values (nested records as dicts), for JSON.");
    cls_.def(
        "keys", [names](const py::object&) { return *names; }, "The fields, in order.");
    cls_.def("__getitem__", [names](const py::object& self, const std::string& key) {
      for (const std::string& n : *names)
        if (n == key) return py::object(self.attr(n.c_str()));
      throw py::key_error(key);
    });
    cls_.def("__eq__", [](const py::object& self, const py::object& other) {
      if (!py::type::of(self).is(py::type::of(other))) return false;
      return self.attr("to_dict")().equal(other.attr("to_dict")());
    });
    cls_.def("__repr__", [names](const py::object& self) {
      std::string out = py::str(py::type::of(self).attr("__name__")).cast<std::string>() + "(";
      for (size_t i = 0; i < names->size(); ++i) {
        const std::string& n = (*names)[i];
        out += (i ? ", " : "") + n + "=" + py::repr(self.attr(n.c_str())).cast<std::string>();
      }
      return out + ")";
    });
    return cls_;
  }

 private:
  pybind11::class_<T, Base...> cls_;
  std::shared_ptr<std::vector<std::string>> names_;
};

}  // namespace clgpu::python
