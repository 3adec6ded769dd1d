"""The graph pass: rewrite a built ``tf.Graph`` so conv/matmul-class ops run in float16 or bfloat16.

One module per pipeline step, lowest first: ``region`` (which ops compute the fetches),
``op_classes`` and ``op_ports`` (op-type knowledge, plain data), ``paint`` (which ops go low),
``placement`` (which allow ops pay in low precision on this device, measured and cached),
``refine`` (cast-saving demotions), ``rebuild`` (re-create the low ops and their casts),
``report`` (what was done and why), and ``rewrite`` (the pipeline). It imports nothing from
loss scaling, training, distribution or measurement.
"""
