// The C++ walk of compiled_bw: what its files share (walk/fastwalk.py is its only user; see
// Note [Fast walk] there).  Consumes torch's C++ headers; produces the declarations the files
// share: the per-class facts (ClassInfo), a slot's state (SlotState), one walk (CWalk), the slots
// of one step (SlotList), the Python objects init() sets, and each file's functions that another
// file calls.  The files, by job:
//   _fastwalk_walk.cpp      per-class facts, the key, the walk
//   _fastwalk_slots.cpp     slot hooks, SlotList, install
//   _fastwalk_run.cpp       direct leaf delivery, the C++ hit path, streams, version checks,
//                           tensor hook calls
//   _fastwalk_bindings.cpp  the Python module (PYBIND11_MODULE) only
// walk/fastwalk.py builds them into one extension.
//
// Every use of torch-internal C++ API by compiled_bw lives in these files (torch 2.13):
//   Node (next_edges, input_metadata, sequence_nr, hook lists, release_variables),
//   AccumulateGrad::variable, SavedVariable (has_hooks, unpack, register_hooks,
//   retrieve_unpack_hook_data, SavedVariableHooks), THPCppFunction/THPFunction cdata,
//   functionToPyObject, THPVariable_Wrap/Unpack, getPyInterpreter, PyFunctionPreHook /
//   PyFunctionPostHook::dict (a node's Python hook dicts), Node::metadata() as
//   PyAnomalyMetadata::dict() (`grad_fn.metadata`), and compiled autograd's key
//   visitor (AutogradCompilerCall, NodeCall, CompiledNodeArgs, CacheKey, SizeInput,
//   TensorArgs::lookup(SavedVariable)) from torch/csrc/dynamo/compiled_autograd.h,
//   TensorImpl::pyobj_slot()->load_pyobj(), and AOTInductor's tensor handles
//   (aoti_torch/utils.h new_tensor_handle, tensor_converter.h
//   alloc_tensors_by_stealing_from_handles) for the C++ hit path (run_native).
// tests/test_fastwalk.py::test_private_cpp_api names each of them when one moves.
//
// Saved tensors: a SavedVariable's byte offset in its node is learned once per class from the
// Python binding (`_raw_saved_X`); compiled_args unpacks it (eager's version check) and
// TensorArgs::lookup(sv) gives the tensor -- one graph input per SavedVariable, as in Python,
// although compiled_args itself deduplicates by TensorImpl (its key keeps the dedup ids, counted
// per node: Note [Node-local tensor ids] in walk/fastwalk.py).
// Slots (Note [Slots] in saved.py), installed only to trace, are C++ SavedVariableHooks holding
// the tensor; Python-read saved tensors keep Python Slots; SlotList drives both.  A slotted
// node's compiled_args would take its hooks path (other bytes), so its key part is kept on the
// slots and reused.  Cache hits install nothing: release_variables after the run, as eager.
#pragma once

#include <torch/extension.h>

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/python_cpp_function.h>
#include <torch/csrc/autograd/python_function.h>
#include <torch/csrc/autograd/python_hook.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <typeinfo>
#include <unordered_map>
#include <vector>

namespace py = pybind11;
using torch::autograd::AccumulateGrad;
using torch::autograd::Edge;
using torch::autograd::InputMetadata;
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::SavedVariableHooks;

namespace compiled_bw::fastwalk {

// How the walk handles a node class (_classify in walk/fastwalk.py answers once per class).
// Defined here only: the bindings export it as the module attribute HOW, which Python reads.
enum How : int8_t { H_TRACE = 0, H_OPAQUE = 1, H_LEAF = 2, H_PY = 3, H_UNSUPPORTED = 4 };

// Python exception classes, set by init().
extern PyObject* g_unsupported;  // WalkUnsupported: the fallback reason
extern PyObject* g_giveup;       // GiveUp: the C++ walk cannot do this step; use Python's

// Note [No iostreams in the walk]: on a GPU image whose torch 2.11 was built from source with
// GCC 13.3 (Ubuntu 24.04, Python 3.12), formatting an integer into a std::ostringstream inside
// this extension crashed the process (SIGSEGV in the std::ostream::_M_insert<long> instantiated
// here, reached from the "modified by an inplace operation" message of slot_unpack); the same
// source on PyPI's 2.11 wheel ran.  Messages are built with std::string and std::to_string.
[[noreturn]] inline void raise(PyObject* cls, const std::string& msg) {
  PyErr_SetString(cls, msg.c_str());
  throw py::error_already_set();
}

// ---- per-class facts, learned once per C++ node type (Python classifies) ----------------

struct Rule {  // see nodes.py _edge_rules / hidden_state_unknown
  bool src_all = false, users_all = false;
  bool offsets = false;  // ("offsets", "offsets"): nodes.py Note [Hidden saved state]
  std::vector<int> src, users;
};

struct Attr {
  std::string name;
  int64_t offset = -1;  // byte offset of the SavedVariable in the node; -1: a list
};

struct ClassInfo {
  uint32_t id = 0;
  How how = H_UNSUPPORTED;
  std::string name, reason;
  std::vector<Rule> rules;
  std::vector<Attr> attrs;
  bool has_list = false;
  py::object kind;  // the Python NodeKind
};

extern std::vector<ClassInfo*> g_class_list;  // by ClassInfo::id
// Python callbacks (heap-allocated and never freed: no decref after interpreter shutdown).
extern py::object& g_classify;  // classify(node, address) -> class facts
extern py::object& g_list_svs;  // list_svs(node, attr) -> [SavedVariable address]
extern py::object& g_py_node;   // py_node(i, node, saved, py_keys, slot_only) -> (entry, kind,
                                //   memo | None)

// How an autograd node is owned: c10::intrusive_ptr on torch 2.13, std::shared_ptr (and a
// weak_ptr in THPFunction) on older releases (e.g. the 2.11 of a GPU machine's image).
using NodePtr = decltype(torch::autograd::Edge::function);
template <class P>
NodePtr owning(const P& p) {
  return p;
}
template <class T>
NodePtr owning(const std::weak_ptr<T>& p) {
  return p.lock();
}

NodePtr node_of(PyObject* o);           // the node of a Python grad_fn object
py::object node_obj(const NodePtr& n);  // the Python object of a node

// ---- slots (_fastwalk_slots.cpp) ----------------------------------------------------------

struct SlotState {
  at::Tensor value, placeholder;
  int64_t version = 0;
  bool released = false;
  // The node's key part (see collect_node): bytes [kb, ke) of its walk's key.
  std::shared_ptr<const std::string> key;
  uint32_t kb = 0, ke = 0;
  std::weak_ptr<SlotState> self;
  // What eager's "modified by an inplace operation" error names (Note [What eager's unpack
  // error names] in saved.py): a saved original's tensor (eager's data_, whose grad_fn is read
  // when the error is raised; a leaf's is not kept), else the grad_fn the unpack gave and its
  // output number; `named` false: not known (the walk's unpack failed), the value's own.
  at::Tensor orig;
  std::string fn_name;
  uint32_t out_nr = 0;
  bool named = false;
};

// Our hooks answer retrieve_unpack_hook_data with (g_marker, address of their SlotState): how
// the walk recognizes its own slots on a SavedVariable walked again (retain_graph=True).
extern PyObject* g_marker;
// Eager's unpack error names a grad_fn without "Backward<N>" (torch 2.13) or whole (2.11).
extern bool g_strip_backward;

at::Tensor slot_unpack(const SlotState& s);  // the tensor, with eager's checks
// The SlotState behind a hooked SavedVariable if the hooks are ours, else null.
std::shared_ptr<SlotState> our_slot(const SavedVariable* sv);

// ---- the walk (_fastwalk_walk.cpp) --------------------------------------------------------

// Where a saved tensor comes from: a C++ SavedVariable (sv != null) or a Python-read key.
struct SavedSrc {
  const SavedVariable* sv;
  int32_t node;
  int32_t attr;  // index into the class's attrs (C++), or into py_keys (Python)
  int32_t pos;   // list position | -1
};

struct CWalk {
  std::vector<NodePtr> nodes;
  std::vector<py::object> pynodes;  // materialized on demand
  std::vector<ClassInfo*> cls;      // per node
  std::vector<uint8_t> opaque;      // per node: 1: TRACE class run opaquely (hidden
                                    // state); 2: saved tensors carry foreign hooks;
                                    // 3: released (Note [Released nodes], fastwalk.py)
  std::vector<std::pair<int32_t, int32_t>> edge_seg;  // per node: (start, count) in edge arrays
  std::vector<int32_t> edge_child, edge_nr;           // in processing order
  std::vector<SavedSrc> saved_src;
  // The saved tensors (graph inputs), in order: C++ tensors until Python asks for them (the
  // `saved` property moves them into a Python list, once); the C++ hit path (run_native)
  // passes them to the compiled graph without ever making Python tensors.
  std::vector<at::Tensor> saved_t;
  py::list saved;
  bool saved_in_py = false;
  py::list py_keys;    // saved_node keys of Python-read saved tensors
  py::list slot_only;  // keys of Python-read slot-only tensors
  py::dict leaves;
  py::list hook_nodes, hook_leaves, py_entries;
  bool leaf_observed = false;  // some leaf's AccumulateGrad has a hook (any kind)
  // create_graph=True: saved tensors our slots hold are unpacked through their SavedVariable,
  // which gives them back their autograd history (Note [Saved tensors with history] in
  // walk/fastwalk.py)
  bool history = false;
  py::list root_edges;
  std::shared_ptr<const std::string> key;
  uint64_t hash = 0;
  // per processed node, one row of LAYOUT_FIELDS (bindings export the names; fastwalk.describe
  // reads rows by them), then an end row: 0xFFFFFFFF, 0, and the execution order's key offset
  std::vector<uint32_t> layout;  // per processed node: index, class id, key offset
  std::vector<std::pair<uint32_t, uint32_t>> ca_range;  // per node: its compiled_args bytes in key
};

// kinds: node index -> NodeKind of the nodes Python (or a custom node's memo) read.
std::shared_ptr<CWalk> walk(py::list roots, py::dict kinds, bool history);
// Note [Custom node memo] (walk/fastwalk.py): memo_init((FWD_KEY, MATERIALIZE_KEY,
// SLOTS_KEY, torch.Size, torch.dtype, torch.device, torch.layout, torch.memory_format)),
// memo_clear (every memo: a verdict or a class's kind changed), memo_stats (memos, hits).
void memo_init(py::tuple names);
void memo_clear();
py::tuple memo_stats();

// SlotList: the slots of one step, parallel to saved + slot_only (_fastwalk_slots.cpp).

struct SlotList {
  std::vector<std::shared_ptr<SlotState>> c;  // null for Python slots
  std::vector<py::object> p;                  // Python Slot or None
  std::vector<int32_t> node;
  size_t n_saved = 0;

  void set_placeholders(py::sequence phs);
  void clear_placeholders();
  void release_one(size_t s);  // drops saved tensor s; a later unpack raises eager's error
  void release(py::iterable executed, size_t n_nodes);
};

// py_slots: the Python Slots of the Python-read saved tensors, then of slot_only (same order as
// py_keys + slot_only); slot_only_nodes: their node indices.
std::shared_ptr<SlotList> install(CWalk& w, py::list py_slots, py::list slot_only_nodes);

// ---- delivery, the hit path, streams (_fastwalk_run.cpp) ----------------------------------

bool plain_accumulator(Node* n);  // an AccumulateGrad with no hook of any kind

// Note [C++ hooks on interior nodes]
// An interior node's hooks that Python registered are PyFunction*Hook objects holding the dict
// that graph/hooks.py reads and runs at eager's point.  Any other hook object was registered
// from C++ (at::Tensor::register_hook in an extension, or torch's own autograd fallback: in its
// default "warn" mode, an op with no autograd kernel whose outputs require grad gets a tensor
// hook that warns when the backward reaches it): Python cannot see it, so a graph would drop its
// call (and, if it changed the grad, the grad).  Such a step falls back to eager, which runs it.
// retains_grad hooks are a list of their own (retain_grad(), read through hooks.RETAINED); leaf
// hooks of any kind are seen by plain_accumulator and run in the real engine.
inline const char* const FOREIGN_HOOK_WHY =
    " (registered from C++, e.g. the autograd fallback's warning for an op with no autograd "
    "kernel): compiled_bw cannot run it";

// Note [Hooks registered before compiled_bw]
// A Python tensor hook on an interior node is seen through the record graph/hooks.py's
// register_hook (which replaces torch.Tensor.register_hook when compiled_bw is imported) puts
// on the node's metadata (graph/hooks.py TENSOR_HOOKS_KEY).  One registered before compiled_bw
// was imported, or while it was uninstalled, has no record: a graph would drop its call.  Such a
// step falls back (`foreign_hook` reports it, as for a hook registered from C++); so does a
// retain_grad() that neither hooks.RETAINED (live tensors) nor the node's record (RETAINS_KEY)
// knows (hook_entries; the binding for the Python walk).  Node pre- and post-hooks need no record:
// their dicts are read from the node itself (hook_dicts_of).
inline const char* const UNSEEN_HOOK_WHY =
    " registered before compiled_bw was imported (or while it was uninstalled): compiled_bw "
    "cannot see it; import compiled_bw before registering hooks";
inline const char* const TENSOR_HOOKS_KEY = "compiled_bw.tensor_hooks";  // graph/hooks.py
inline const char* const RETAINS_KEY = "compiled_bw.retains_grad";       // graph/hooks.py
// Whether graph/hooks.py's retain_grad recorded a retain_grad() on this node (its tensor may
// have died since: eager's retains_grad hook then writes nothing).
bool retain_recorded(Node* node);

// Why the node's hooks cannot be run by a graph (the reason's text after the node's name is
// FOREIGN_HOOK_WHY, or UNSEEN_HOOK_WHY where *unseen is set), or nullptr.
const char* foreign_hook(Node* node, bool* unseen);
// The fallback reason for what foreign_hook(node, &unseen) found.
inline std::string hook_reason(Node* node, const char* what, bool unseen) {
  return std::string(what) + " on " + node->name() + (unseen ? UNSEEN_HOOK_WHY : FOREIGN_HOOK_WHY);
}
inline const char* foreign_hook(Node* node) {
  for (const auto& h : node->tensor_pre_hooks())
    if (std::strcmp(typeid(*h).name(), "N5torch8autograd23PyFunctionTensorPreHookE") != 0)
      return "a C++ tensor hook";
  for (const auto& h : node->pre_hooks())
    if (std::strcmp(typeid(*h).name(), "N5torch8autograd17PyFunctionPreHookE") != 0)
      return "a C++ pre-hook";
  for (const auto& h : node->post_hooks())
    if (std::strcmp(typeid(*h).name(), "N5torch8autograd18PyFunctionPostHookE") != 0)
      return "a C++ post-hook";
  return nullptr;
}
// A node's Python (pre-hook, post-hook) dicts: the PyFunctionPreHook's / PyFunctionPostHook's
// (borrowed), nullptr where it has none (graph/hooks.py node_hooks' `dicts`).
std::pair<PyObject*, PyObject*> hook_dicts_of(Node* fn);
// walk/fastwalk.py Note [Hook entries in C++]: (hooks {index: NodeHooks}, [(index, hook
// signature)]) of the walk's hooked nodes; the Python builder for the others.
py::tuple hook_entries(CWalk& w, py::tuple names, bool tensor_hooks, py::object retained);
// graph/saved.py Note [Version checks in C++]: per opaque site, the saved tensors it checks
// once it ran, with their versions when the graph started.
struct VersionChecks {
  std::vector<std::vector<std::pair<at::Tensor, int64_t>>> sites;  // by site id
  std::vector<py::object> readers;  // by site: its ((saved position, traced reader | None), ...)
  size_t left = 0;                  // sites not checked yet
  // None, or (tensor, expected version, traced reader | None) of the first tensor of `site`
  // modified since; the site's tensors are dropped either way (checked once).
  py::object check(size_t site);
};
std::shared_ptr<VersionChecks> version_checks(py::list box, size_t off, py::tuple spec);
// calls/opaque.py Note [Hook calls in C++]: hooks_init(_after_user_code, _outputs,
// hooks.check_single, saved.raise_modified); tensor_hooks_call(step, site object, site, hooks,
// grads, label) -> the call's outputs.
void hooks_init(py::object after_user_code, py::object outputs, py::object check_single,
                py::object raise_modified);
py::object tensor_hooks_call(py::handle step, py::handle s, py::handle site, py::handle h,
                             py::list grads, py::handle label);
// calls/opaque.py Note [Custom calls in C++]: custom_init(_custom_tail, hooks.COUNTS,
// custom.FWD_KEY); custom_call(step, site object, site, grads, label) -> the call's outputs,
// or None when the call is Python's (before any user code ran).
void custom_init(py::object custom_tail, py::object counts, py::object fwd_key);
py::object custom_call(py::handle step, py::handle s, py::handle site, py::list grads,
                       py::handle label);
bool accumulate(const std::vector<Node*>& nodes, py::list grads);
void run_leaf(Node* fn, at::Tensor grad);
py::object run_native(CWalk& w, py::handle entry, py::list roots, size_t n_inputs,
                      py::sequence leaf_idx_seq, py::sequence leaf_pos_seq, bool accumulate,
                      py::list tail);
using Streams = std::set<std::tuple<std::string, int, int64_t>>;  // (device type, index, id)
void add_streams(Node* n, Streams& out);
py::list stream_list(const Streams& s);

}  // namespace compiled_bw::fastwalk
