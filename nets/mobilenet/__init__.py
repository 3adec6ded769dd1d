"""MobileNet v2, v3 and EdgeTPU, built from conv defs (the official ``nets.mobilenet`` package).

``conv_blocks`` holds the blocks, ``mobilenet`` the conv-def builder and training
scope, ``mobilenet_v2`` and ``mobilenet_v3`` the conv defs and network functions.
"""
