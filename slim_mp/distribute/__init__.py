"""Several devices and machines: model clones, parameter-server clusters, the local cluster launcher."""
