"""CUDA knowledge: toolkit tables, arch flags, the target planner, nvcc probing, the JIT cache, doctor."""
