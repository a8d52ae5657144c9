"""The operators' rules as data and pure functions: versions, shapes and dtypes, quantized rules, input validation."""
