"""NASNet-A and PNASNet-5, at the official ``nets.nasnet`` package paths (``nasnet``, ``nasnet_utils``, ``pnasnet``)."""
