"""Child of test_faults_cache.py: one run of model.tflite on input.npy with the disk cache, in a
fresh process (no programs in memory); writes output.npy and prints the delegate's stats.

    python cache_child.py CACHE_DIR RUNTIME '{"option": "value"}'
"""

import json
import resource
import sys

import numpy as np

import clgpu_delegate
from clgpu_delegate.runtime import make_interpreter

with open("model.tflite", "rb") as f:
    model = f.read()
x = np.load("input.npy")
options = json.loads(sys.argv[3])
d = clgpu_delegate.load(serialization_dir=sys.argv[1], model_token="faults-test", **options)
interp = make_interpreter(model, [d], runtime=sys.argv[2], reference=True)
interp.allocate_tensors()
interp.set_tensor(interp.get_input_details()[0]["index"], x)
interp.invoke()
np.save("output.npy", interp.get_tensor(interp.get_output_details()[0]["index"]))
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(
    json.dumps({"delegated": d.delegated_nodes(), "stats": d.stats().to_dict(), "rss_kb": rss_kb})
)
