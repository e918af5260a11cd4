"""The generated node tables, one module per torch release (major.minor): `torch_2_13.py` is
made by `python tools/gen_node_table.py --write` under torch 2.13 (graph/node_table.py
loads the installed release's)."""
