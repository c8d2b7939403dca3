"""kernel-workbench: LLM-driven CUDA kernel search with a verifier you can trust."""

__version__ = "0.1.0"
