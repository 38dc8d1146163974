"""The memory feature: four layers, hybrid recall (sqlite-vec + FTS5), offline embeddings."""
