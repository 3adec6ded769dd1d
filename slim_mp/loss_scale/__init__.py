"""Loss scaling, a drop-in for ``tf.contrib.mixed_precision``: managers, the optimizer, finite checks, skip counts.

It imports nothing from the graph pass, training, distribution or measurement.
"""
