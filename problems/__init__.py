"""The problem library: one KernelBench-format file per problem (ships inside the package)."""
