"""What opsmith needs from the versions of its dependencies it supports: ``torch_private`` names every private
torch name opsmith reads, with the versions it was seen in, and the C++ flags torch compiles extensions with."""
