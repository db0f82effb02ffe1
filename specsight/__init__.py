"""specsight: predict whether speculative decoding speeds up an LLM deployment, and by how much."""
__version__ = "0.1.0"
