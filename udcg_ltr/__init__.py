"""udcg-ltr: learning to rank for retrieval-augmented generation, with LLM utility as the target."""

__version__ = "0.1.0"
