"""Process resources: integer settings, the thread pool, output buffers, the memory limit."""
