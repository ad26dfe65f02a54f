"""mixlib: exact, fast analyses of BERT's inside, for the book and for research.

Analysis A (Kobayashi et al.): how much each layer *mixes* context vs. *preserves*
the token itself, through attention, the residual connection and LayerNorm
(:mod:`mixlib.mixing`). Analysis B (Maeda et al.): how much each attention head
stretches the norm of each word embedding (psi, :mod:`mixlib.stretch`), over
k-means clusters of the vocabulary (:mod:`mixlib.clusters`), and how word and
position embeddings sit in nearly orthogonal subspaces (:mod:`mixlib.positional`).

The public API is ``mixlib.__all__``: the names below, documented in the book's reference appendix
(``book/reference/api.md``, generated from these docstrings; ``tests/test_api_reference.py`` keeps the two equal).
The modules that serve the book itself (``mixlib.course``, ``mixlib.exercise``, ``mixlib.widgets``,
``mixlib.interactive``, ``mixlib.glue``, ``mixlib.plots``, ``mixlib._colab`` ...) may change with any chapter.

Modules are imported lazily so that ``import mixlib`` stays cheap: it imports neither torch nor
transformers until an analysis (or :func:`load_encoder`) is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from .paths import data_path

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    # the encoder (torch is imported with it, not with ``import mixlib``)
    "load_encoder": "models",
    "Encoder": "models",
    "FAMILIES": "models",
    # analysis A
    "decompose": "mixing",
    "Mixing": "mixing",
    "mixing_table": "mixing",
    "mixing_summary": "mixing",
    "mask_tokens": "data",
    "mask_count": "data",
    "mixing_conventions": "mixing",
    "MixingVariants": "mixing",
    "tokenize": "data",
    "truncate_text": "data",
    "token_categories": "data",
    # beyond the papers: token-to-token maps and other mixing measures
    "context_maps": "measures",
    "ContextMaps": "measures",
    "measure_agreement": "measures",
    "stream_mixing": "stream",
    "merge_mixing": "stream",
    # analysis B
    "norm_stretch": "stretch",
    "Stretch": "stretch",
    "stretch_bounds": "stretch",
    "cluster_vocab": "clusters",
    "VocabClusters": "clusters",
    "cluster_summary": "clusters",
    "recluster_centroids": "clusters",
    "cluster_stretch": "clusters",
    "top_clusters": "clusters",
    "type_map": "clusters",
    "find_cluster": "clusters",
    "token_type": "clusters",
    "TYPES": "clusters",
    "UpperClusters": "clusters",
    "StretchBounds": "stretch",
    "random_psi_rms": "stretch",
    "normalize_stretch": "stretch",
    "bias_rank_correlation": "stretch",
    "eigen_alignment": "stretch",
    "cluster_permutation_null": "clusters",
    "ClusterNull": "clusters",
    "feature_scores": "clusters",
    "feature_null": "clusters",
    "trained_pool": "clusters",
    "best_head_support": "clusters",
    "feature_sets": "clusters",
    "FeatureNull": "clusters",
    "cluster_stability": "clusters",
    "ClusterStability": "clusters",
    "principal_angles": "positional",
    "positional_orthogonality": "positional",
    "Positional": "positional",
    "position_attention": "positional",
    "centred_overlap": "positional",
    "Overlap": "positional",
    "token_attention": "positional",
    "map_correlation": "positional",
    "own_sieve": "positional",
    "offset_groups": "positional",
    "psi_rank_agreement": "positional",
}

__all__ = ["data_path", *_LAZY]

# The two public constants, declared here (not assigned: their values load lazily from their modules) so
# that the reference (book/reference/api.md, Sphinx autodoc) reads their documentation from this module.

#: The supported model families, ``config.model_type`` -> where each part of the model sits (a
#: ``mixlib.models.Family``). All are post-LayerNorm encoders with the BERT module layout: ``bert``,
#: ``roberta`` and ``electra``.
FAMILIES: dict

#: The token types of :func:`token_type`, in the order used for codes, tables and tie-breaking
#: (``Words``, ``Subwords``, ``Symbols``, ``Numbers``, ``Special``, ``Tags``).
TYPES: tuple


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mixlib' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
