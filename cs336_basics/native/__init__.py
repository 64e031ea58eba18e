"""The compiled side: the bindings to the C++ library in cpp/, and whether they may load."""
