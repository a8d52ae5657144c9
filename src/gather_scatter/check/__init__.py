"""``gather-scatter check``: find where other ONNX engines get these operators wrong.

``cases`` generates valid and invalid cases for every operator version (the test suite draws
from the same generators); our kernels give the expected result or error.
"""
