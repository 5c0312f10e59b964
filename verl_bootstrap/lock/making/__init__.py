"""The locking machinery: `lock` (resolve each stage, the conda part, verl's uv.lock, build
requirements, kernel wheels), `lock --check` and drift."""
