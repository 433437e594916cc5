// Output size and padding arithmetic of TFLite's SAME/VALID convolutions, shared
// by CONV_2D and DEPTHWISE_CONV_2D.
#pragma once

#include <algorithm>

namespace clgpu {

struct ConvGeometry {
  int n = 0, h = 0, w = 0, c = 0;  // input NHWC
  int kh = 0, kw = 0;              // filter spatial size
  int sh = 1, sw = 1, dh = 1, dw = 1;
  int oh = 0, ow = 0, oc = 0;
  int pad_top = 0, pad_left = 0;

  // padding: 1 SAME, 2 VALID. An input smaller than the filter gives an empty
  // output (0 rows or columns), as on the CPU.
  void Compute(int padding) {
    const int ekh = (kh - 1) * dh + 1, ekw = (kw - 1) * dw + 1;
    if (padding == 1) {
      oh = (h + sh - 1) / sh;
      ow = (w + sw - 1) / sw;
      pad_top = std::max((oh - 1) * sh + ekh - h, 0) / 2;
      pad_left = std::max((ow - 1) * sw + ekw - w, 0) / 2;
    } else {
      oh = (h - ekh + sh) / sh;
      ow = (w - ekw + sw) / sw;
      pad_top = pad_left = 0;
    }
    oh = std::max(oh, 0);
    ow = std::max(ow, 0);
  }
  double Macs() const { return double(n) * oh * ow * oc * kh * kw * c; }
};

}  // namespace clgpu
