"""From a trained checkpoint to a servable model: inference graphs, frozen weights, SavedModels (issue 16)."""
