// The C++ walk's one translation unit: consumes the four job files (_fastwalk.h says which does
// what); produces the extension walk/fastwalk.py builds.  They are compiled as one unit because
// torch's headers are most of each file's compile time (~48 s of each unit's ~60 s at -O2):
// one unit builds in 77-82 s on one core where four took ~150 s on two.  The four stay separate
// files (by job) and the source hash covers each of them.
#include "_fastwalk_bindings.cpp"
#include "_fastwalk_run.cpp"
#include "_fastwalk_slots.cpp"
#include "_fastwalk_walk.cpp"
