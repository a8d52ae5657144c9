"""The operators' rules as data and pure functions: versions, dims, shapes, dtypes, quantized rules, validation."""
