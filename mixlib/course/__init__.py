"""Teaching code the chapters of Parts I-IV reuse (toy corpora, word2vec, seq2seq, a small Transformer).

The analyses of Part V live in the top-level modules of mixlib; this subpackage
holds what the earlier chapters build step by step and later chapters reuse.
"""
