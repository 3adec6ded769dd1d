"""The training application behind the scripts: config, flags, graph, session, checkpoints, evaluation."""
