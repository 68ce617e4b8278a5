"""benchmint: build and score scientific multimodal benchmarks at scale."""

__version__ = "0.1.0"
