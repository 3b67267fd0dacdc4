"""`python -m downstream.finetune`: one small head on an exported module (classification, pairs, tagging,
SQuAD spans); task data, inputs shared by training and the serving export, heads, and the text-in export.
"""
