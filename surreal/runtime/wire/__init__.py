"""The wire: what a run's processes say to each other, checked both ways.

Message schemas and the ports that never die on a bad one (`guard`, `schemas`, `ports`), the
batch and policy protocols, the parameter and policy clients that ask a restarting peer again,
Curve keys and the metrics token that keep strangers out.
"""
