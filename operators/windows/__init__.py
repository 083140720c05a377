"""Data windows of Esper ref. 14, Apama batched windows, SPL timeInterval window panes.

Use ``registry.make_view_spec`` for one window and ``registry.make_view_chain`` for all
windows declared on a stream; ``spec.build(state, ctx)`` makes the view of a partition.
"""
