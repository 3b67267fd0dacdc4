"""Keras models for the biLM, GPT and BERT, and their training (later issues)."""
