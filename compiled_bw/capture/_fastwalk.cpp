// The C++ walk of compiled_bw (capture/fastwalk.py is its only user; see Note [Fast walk]
// there).  Every use of torch-internal C++ API by compiled_bw lives in this file (torch 2.13):
//   Node (next_edges, input_metadata, sequence_nr, hook lists, release_variables),
//   AccumulateGrad::variable, SavedVariable (has_hooks, unpack, register_hooks,
//   retrieve_unpack_hook_data, SavedVariableHooks), THPCppFunction/THPFunction cdata,
//   functionToPyObject, THPVariable_Wrap/Unpack, getPyInterpreter, and compiled autograd's key
//   visitor (AutogradCompilerCall, NodeCall, CompiledNodeArgs, CacheKey, SizeInput,
//   TensorArgs::lookup(SavedVariable)) from torch/csrc/dynamo/compiled_autograd.h,
//   TensorImpl::pyobj_slot()->load_pyobj(), and AOTInductor's tensor handles
//   (aoti_torch/utils.h new_tensor_handle, tensor_converter.h
//   alloc_tensors_by_stealing_from_handles) for the C++ hit path (run_native).
// tests/test_fastwalk.py::test_private_cpp_api names each of them when one moves.
//
// Per node, in the Python walk's discovery order, the key gets: index, class id, edges
// (child index | -1, input_nr), input metadata, and then
//   TRACE / OPAQUE nodes: the bytes Node::compiled_args specializes on (every saved field,
//     including those Python cannot read: MmBackward0's self_layout, native_dropout's train,
//     ...), the SymInts it lifts as "size inputs" (TRACE nodes only: an opaque node runs the
//     real node, so its sizes are not baked into the graph), and the metadata of each saved
//     tensor in the Python walk's order (attributes sorted by name, list elements in order);
//   TRACE / OPAQUE nodes whose saved tensors carry hooks that are not ours: one marker byte
//     instead (never unpacked, no compiled_args; the node runs as one opaque call, nodes.py
//     Note [Hooked saved tensors]);
//   LEAF: the variable's metadata and requires_grad;
//   PY (custom Function / AOT nodes, classes whose compiled_args is unusable): nothing more;
//     Python builds their signature entry (callback), in processing order.
// then the execution order (the permutation sorting the sequence numbers).
//
// Saved tensors: a SavedVariable's byte offset in its node is learned once per class from the
// Python binding (`_raw_saved_X`); compiled_args unpacks it (eager's version check) and
// TensorArgs::lookup(sv) gives the tensor -- one graph input per SavedVariable, as in Python,
// although compiled_args itself deduplicates by TensorImpl (its key keeps the dedup ids).
// Slots (Note [Slots] in saved.py), installed only to trace, are C++ SavedVariableHooks holding
// the tensor; Python-read saved tensors keep Python Slots; SlotList drives both.  A slotted
// node's compiled_args would take its hooks path (other bytes), so its key part is kept on the
// slots and reused.  Cache hits install nothing: release_variables after the run, as eager.
#include <torch/extension.h>

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/python_cpp_function.h>
#include <torch/csrc/autograd/python_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>
#include <torch/csrc/inductor/aoti_torch/tensor_converter.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace py = pybind11;
using torch::autograd::AccumulateGrad;
using torch::autograd::Edge;
using torch::autograd::InputMetadata;
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::SavedVariableHooks;
using torch::dynamo::autograd::AutogradCompilerCall;
using torch::dynamo::autograd::CompiledNodeArgs;
using torch::dynamo::autograd::NodeCall;
using torch::dynamo::autograd::SizeInput;
using torch::dynamo::autograd::TensorArg;

bool plain_accumulator(Node* n);  // below: an AccumulateGrad with no hook of any kind

namespace {

enum How : int8_t { H_TRACE = 0, H_OPAQUE = 1, H_LEAF = 2, H_PY = 3, H_UNSUPPORTED = 4 };

// Python exception classes, set by init().
PyObject* g_unsupported = nullptr;   // WalkUnsupported: the fallback reason
PyObject* g_giveup = nullptr;        // GiveUp: the C++ walk cannot do this step; use Python's

[[noreturn]] void raise(PyObject* cls, const std::string& msg) {
  PyErr_SetString(cls, msg.c_str());
  throw py::error_already_set();
}

// ---- per-class facts, learned once per C++ node type (Python classifies) ----------------

struct Rule {  // see nodes.py _edge_rules / hidden_state_unknown
  bool src_all = false, users_all = false;
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

std::unordered_map<const std::type_info*, ClassInfo*> g_classes;  // type_info is unique per type
std::vector<ClassInfo*> g_class_list;
// Python callbacks (heap-allocated and never freed: no decref after interpreter shutdown).
py::object& g_classify = *new py::object();  // classify(node, address) -> class facts
py::object& g_list_svs = *new py::object();  // list_svs(node, attr) -> [SavedVariable address]
py::object& g_py_node = *new py::object();   // py_node(i, node, saved, py_keys, slot_only) -> entry

// How an autograd node is owned: c10::intrusive_ptr on torch 2.13, std::shared_ptr (and a
// weak_ptr in THPFunction) on older releases (e.g. the 2.11 of a GPU machine's image).
using NodePtr = decltype(torch::autograd::Edge::function);
template <class P> NodePtr owning(const P& p) { return p; }
template <class T> NodePtr owning(const std::weak_ptr<T>& p) { return p.lock(); }

NodePtr node_of(PyObject* o) {
  if (torch::autograd::THPCppFunction_Check(o)) return owning(((torch::autograd::THPCppFunction*)o)->cdata);
  if (THPFunction_Check(o)) return owning(((THPFunction*)o)->cdata);
  raise(PyExc_TypeError, "compiled_bw fastwalk: not an autograd node");
}

py::object node_obj(const NodePtr& n) {
  PyObject* o = torch::autograd::functionToPyObject(n);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

ClassInfo* class_info(Node* node, const NodePtr& owner) {
  const std::type_info* ti = &typeid(*node);
  static const std::type_info* last_ti = nullptr;
  static ClassInfo* last = nullptr;
  if (ti == last_ti) return last;
  auto it = g_classes.find(ti);
  if (it != g_classes.end()) {
    last_ti = ti;
    last = it->second;
    return last;
  }
  py::tuple r = g_classify(node_obj(owner), (size_t)node);
  auto* info = new ClassInfo();
  info->how = (How)r[0].cast<int>();
  info->name = r[1].cast<std::string>();
  info->reason = r[2].cast<std::string>();
  for (auto rule : r[3].cast<py::tuple>()) {
    auto t = rule.cast<py::tuple>();
    Rule ru;
    if (py::isinstance<py::str>(t[0])) ru.src_all = true;
    else for (auto k : t[0].cast<py::tuple>()) ru.src.push_back(k.cast<int>());
    if (py::isinstance<py::str>(t[1])) ru.users_all = true;
    else for (auto k : t[1].cast<py::tuple>()) ru.users.push_back(k.cast<int>());
    info->rules.push_back(std::move(ru));
  }
  for (auto a : r[4].cast<py::tuple>()) {
    auto t = a.cast<py::tuple>();
    Attr at{t[0].cast<std::string>(), t[1].cast<int64_t>()};
    info->has_list |= at.offset < 0;
    info->attrs.push_back(std::move(at));
  }
  info->kind = r[5];
  // classify may have released the GIL: another thread may have registered this type meanwhile
  auto [it2, fresh] = g_classes.emplace(ti, info);
  if (!fresh) {
    delete info;
    return it2->second;
  }
  info->id = (uint32_t)g_class_list.size();
  g_class_list.push_back(info);
  return info;
}

bool hidden_state_unknown(const ClassInfo& ci, const std::vector<int32_t>& kids) {
  const size_t n = kids.size();
  for (const Rule& r : ci.rules) {
    bool used = false, known = true;
    if (r.users_all) { for (auto c : kids) used |= c >= 0; }
    else for (int u : r.users) if ((size_t)u < n && kids[u] >= 0) used = true;
    if (r.src_all) { for (auto c : kids) known &= c >= 0; }
    else for (int k : r.src) if ((size_t)k < n && kids[k] < 0) known = false;
    if (used && !known) return true;
  }
  return false;
}

// ---- slots ---------------------------------------------------------------------------------

struct SlotState {
  at::Tensor value, placeholder;
  int64_t version = 0;
  bool released = false;
  // The node's key part (see collect_node): bytes [kb, ke) of its walk's key.
  std::shared_ptr<const std::string> key;
  uint32_t kb = 0, ke = 0;
  std::weak_ptr<SlotState> self;
};

// Our hooks answer retrieve_unpack_hook_data with (g_marker, address of their SlotState): how
// the walk recognizes its own slots on a SavedVariable walked again (retain_graph=True).
PyObject* g_marker = nullptr;

std::string type_str(const at::Tensor& t) {
  std::string s = "torch.";
  if (t.device().type() != c10::DeviceType::CPU) s += c10::DeviceTypeName(t.device().type(), true) + ".";
  return s + c10::toString(t.scalar_type()) + "Tensor";
}

at::Tensor slot_unpack(const SlotState& s) {
  if (s.placeholder.defined()) return s.placeholder;
  TORCH_CHECK(!s.released, torch::autograd::ERR_BACKWARD_TWICE);
  const at::Tensor& t = s.value;
  if (t._version() != s.version) {
    std::ostringstream m;
    m << "one of the variables needed for gradient computation has been modified by an "
         "inplace operation: [" << type_str(t) << " " << t.sizes() << "] is at version "
      << t._version() << "; expected version " << s.version
      << " instead. Hint: enable anomaly detection to find the operation that failed to "
         "compute its gradient, with torch.autograd.set_detect_anomaly(True).";
    TORCH_CHECK(false, m.str());
  }
  return t;
}

struct SlotHooks : SavedVariableHooks {
  std::shared_ptr<SlotState> st;
  explicit SlotHooks(std::shared_ptr<SlotState> s) : st(std::move(s)) {}
  void call_pack_hook(const at::Tensor& t) override {
    st->value = t;
    st->version = t._version();
  }
  at::Tensor call_unpack_hook() override { return slot_unpack(*st); }
  // Called by compiled_args (ours, and torch's compiled autograd) on a hooked SavedVariable.
  std::optional<std::pair<c10::SafePyObject, c10::SafePyObject>> retrieve_unpack_hook_data()
      const override {
    Py_INCREF(g_marker);
    PyObject* addr = PyLong_FromVoidPtr(st.get());
    return std::make_pair(c10::SafePyObject(g_marker, getPyInterpreter()),
                          c10::SafePyObject(addr, getPyInterpreter()));
  }
};

// The SlotState behind a hooked SavedVariable if the hooks are ours, else null.
std::shared_ptr<SlotState> our_slot(const SavedVariable* sv) {
  std::optional<std::pair<c10::SafePyObject, c10::SafePyObject>> data;
  try {
    data = sv->retrieve_unpack_hook_data();  // PySavedVariableHooks: (unpack fn, packed)
  } catch (const c10::Error&) {              // C++ hooks of someone else
    return nullptr;
  }
  if (!data || data->first.ptr(getPyInterpreter()) != g_marker) return nullptr;
  auto* st = static_cast<SlotState*>(PyLong_AsVoidPtr(data->second.ptr(getPyInterpreter())));
  return std::shared_ptr<SlotState>(st->self.lock());
}

// ---- the key -------------------------------------------------------------------------------

struct Key {  // append-only byte buffer (std::string::append per field was a hot spot)
  std::string b;
  size_t n = 0;
  Key() { b.resize(1 << 16); }
  char* room(size_t m) {
    if (C10_UNLIKELY(n + m > b.size())) b.resize(std::max(b.size() * 2, n + m));
    char* p = &b[n];
    n += m;
    return p;
  }
  template <typename T>
  void put(T v) {
    std::memcpy(room(sizeof(T)), &v, sizeof(T));
  }
  void put_bytes(const void* p, size_t m) { std::memcpy(room(m), p, m); }
  size_t size() const { return n; }
  std::string take() {
    b.resize(n);
    return std::move(b);
  }
};

int64_t concrete(const c10::SymInt& s) {
  if (auto v = s.maybe_as_int()) return *v;
  raise(g_giveup, "symbolic size in the graph");
}

// Checks what walk.py's tensor_meta checks (dense tensors only); appends the metadata.
// obj: the tensor's Python object, or null when it has none yet (THPVariable_Wrap would make a
// plain torch.Tensor for it: subclass instances always have theirs).
void tensor_key(Key& k, const at::Tensor& t, PyObject* obj) {
  if (t.layout() != at::kStrided || t.is_nested()) {
    auto wrapped = py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
    std::string lay = py::str(wrapped.attr("layout"));
    raise(g_unsupported, "non-strided tensor (" + lay + ") in the graph");
  }
  // Tensor subclasses are flattened at the graph boundary by the Python walk (subclass.py,
  // Note [Subclasses stay outside the graph]); it also gives the fallback reason for those it
  // cannot flatten.  The reason's text before ": " is the give-up counter's key.
  PyTypeObject* tp = obj ? Py_TYPE(obj) : (PyTypeObject*)THPVariableClass;
  if (tp != (PyTypeObject*)THPVariableClass && tp != (PyTypeObject*)ParameterClass)
    raise(g_giveup, std::string("tensor subclass in the graph: ") + py::str(py::handle((PyObject*)tp).attr("__name__")).cast<std::string>());
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  k.put<uint8_t>((uint8_t)sizes.size());
  for (auto s : sizes) k.put<int64_t>(s);
  for (auto s : strides) k.put<int64_t>(s);
  k.put<int8_t>((int8_t)t.scalar_type());
  k.put<int8_t>((int8_t)t.device().type());
  k.put<int8_t>(t.device().index());
  if (at::isComplexType(t.scalar_type())) {
    k.put<uint8_t>(t.is_conj());
    k.put<uint8_t>(t.is_neg());
  }
}

void meta_key(Key& k, const InputMetadata& m) {
  if (m.was_default_constructed()) {
    k.put<uint8_t>(0xEE);
    return;
  }
  if (m.is_nested_tensor()) raise(g_giveup, "nested tensor input metadata");
  auto shape = m.shape_as_dim_vector();
  k.put<uint8_t>((uint8_t)shape.size());
  for (const auto& s : shape) k.put<int64_t>(concrete(s));
  k.put<int8_t>((int8_t)c10::typeMetaToScalarType(m.dtype()));
  auto gd = m.grad_dtype();
  k.put<int8_t>(gd.has_value() ? (int8_t)*gd : (int8_t)-1);
  k.put<int8_t>((int8_t)m.device().type());
  k.put<int8_t>(m.device().index());
  k.put<uint8_t>((uint8_t)m.layout());
  k.put<uint8_t>(m.is_tensor_subclass());
}

uint64_t hash_bytes(const std::string& s) {  // 64-bit multiply-mix over 8-byte words
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0, n = s.size();
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, n - i);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

// ---- the walk ------------------------------------------------------------------------------

// Node* -> discovery index: open addressing, linear probing (no allocation per node).
struct NodeIndex {
  std::vector<std::pair<Node*, int32_t>> slots;
  size_t mask, used = 0;
  NodeIndex() : slots(2048, {nullptr, -1}), mask(2047) {}
  static size_t h(Node* p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 20); }
  // (index, fresh): the node's index, or `next` if it is new.
  std::pair<int32_t, bool> find_or_add(Node* p, int32_t next) {
    if (C10_UNLIKELY((used + 1) * 2 > slots.size())) grow();
    for (size_t j = h(p) & mask;; j = (j + 1) & mask) {
      auto& e = slots[j];
      if (e.first == p) return {e.second, false};
      if (!e.first) {
        e = {p, next};
        ++used;
        return {next, true};
      }
    }
  }
  void grow() {
    std::vector<std::pair<Node*, int32_t>> old(slots.size() * 2, {nullptr, -1});
    old.swap(slots);
    mask = slots.size() - 1;
    for (auto& e : old)
      if (e.first)
        for (size_t j = h(e.first) & mask;; j = (j + 1) & mask)
          if (!slots[j].first) {
            slots[j] = e;
            break;
          }
  }
};

// Where a saved tensor comes from: a C++ SavedVariable (sv != null) or a Python-read key.
struct SavedSrc {
  const SavedVariable* sv;
  int32_t node;
  int32_t attr;   // index into the class's attrs (C++), or into py_keys (Python)
  int32_t pos;    // list position | -1
};

struct CWalk {
  std::vector<NodePtr> nodes;
  std::vector<py::object> pynodes;           // materialized on demand
  std::vector<ClassInfo*> cls;               // per node
  std::vector<uint8_t> opaque;               // per node: 1: TRACE class run opaquely (hidden
                                             // state); 2: saved tensors carry foreign hooks
  std::vector<std::pair<int32_t, int32_t>> edge_seg;  // per node: (start, count) in edge arrays
  std::vector<int32_t> edge_child, edge_nr;  // in processing order
  std::vector<SavedSrc> saved_src;
  // The saved tensors (graph inputs), in order: C++ tensors until Python asks for them (the
  // `saved` property moves them into a Python list, once); the C++ hit path (run_native)
  // passes them to the compiled graph without ever making Python tensors.
  std::vector<at::Tensor> saved_t;
  py::list saved;
  bool saved_in_py = false;
  py::list py_keys;                          // saved_node keys of Python-read saved tensors
  py::list slot_only;                        // keys of Python-read slot-only tensors
  py::dict leaves;
  py::list hook_nodes, hook_leaves, py_entries;
  bool leaf_observed = false;                // some leaf's AccumulateGrad has a hook (any kind)
  py::list root_edges;
  std::shared_ptr<const std::string> key;
  uint64_t hash = 0;
  std::vector<uint32_t> layout;              // per processed node: index, class id, key offset
  std::vector<std::pair<uint32_t, uint32_t>> ca_range;  // per node: its compiled_args bytes in key
};

// One CompiledNodeArgs (and NodeCall) for many nodes: NodeCall::node is re-pointed per node and
// each node's bytes are the growth of the visitor's buffer.  CacheKey::key_size is a uint16_t,
// so the offsets are tracked here and a fresh visitor starts every 32 KB.
struct Visitor {
  AutogradCompilerCall& cc;
  NodeCall call;
  std::optional<CompiledNodeArgs> args;
  size_t used = 0;       // bytes in args' buffer
  explicit Visitor(AutogradCompilerCall& c) : cc(c), call(0, NodePtr()) {}
  // Appends node's compiled_args bytes to k (size-prefixed).
  void visit(Node* node, const NodePtr& owner, const ClassInfo& ci, Key& k) {
    if (!args || used > (1u << 15)) {
      args.reset();
      args.emplace(cc, call);
      used = 0;
    }
    call.node = owner;
    try {
      node->compiled_args(*args);
    } catch (const c10::Error& e) {  // also eager's errors (saved tensor modified in place):
      // the Python walk meets those again and reports them as eager would
      args.reset();
      raise(g_giveup, ci.name + "::compiled_args raised: " + e.what_without_backtrace());
    }
    auto ck = args->key();
    const uint32_t n = (uint16_t)(ck.key_size - (uint16_t)used);  // < 64 KB per node
    k.put<uint32_t>(n);
    k.put_bytes(ck.key + used, n);
    used += n;
  }
};

// One node's part of the key: its compiled_args bytes and sizes, then its saved tensors.  A
// node whose saved tensors already carry our slots (a retained graph walked again) reuses the
// bytes recorded at install: compiled_args would take its hooks path and write other bytes.
void collect_node(CWalk& w, AutogradCompilerCall& cc, Visitor& vis, int i, Node* node,
                  const NodePtr& owner, const ClassInfo& ci, bool opaque,
                  Key& k) {
  // The SavedVariables, in the Python walk's order: per attr, its element(s).
  struct One { const SavedVariable* sv; int a; int pos; };
  static thread_local std::vector<One> svs;
  static thread_local std::vector<uint32_t> attr_end;  // per attr: end of its elements in svs
  svs.clear();
  attr_end.clear();
  for (int a = 0; a < (int)ci.attrs.size(); ++a) {
    const Attr& at = ci.attrs[a];
    if (at.offset >= 0) {
      svs.push_back({reinterpret_cast<const SavedVariable*>(reinterpret_cast<const char*>(node) + at.offset), a, -1});
    } else {
      py::list addrs = g_list_svs(node_obj(owner), at.name);
      for (size_t j = 0; j < addrs.size(); ++j)
        svs.push_back({reinterpret_cast<const SavedVariable*>(addrs[j].cast<size_t>()), a, (int)j});
    }
    attr_end.push_back((uint32_t)svs.size());
  }
  std::shared_ptr<const std::string> cached;
  std::pair<uint32_t, uint32_t> cached_range;
  for (const One& o : svs) {
    if (!o.sv->has_hooks()) continue;
    auto st = our_slot(o.sv);
    if (!st) {
      // Hooks that are not ours (saved_tensors_hooks, checkpoint): never unpacked here, an
      // unpack hook is user code.  The real node runs as one opaque call and unpacks them as
      // eager does (nodes.py Note [Hooked saved tensors]); the key says only that.
      size_t start = k.size();
      k.put<uint8_t>(0xB0);
      w.opaque[i] = 2;
      w.ca_range[i] = {(uint32_t)start, (uint32_t)k.size()};
      return;
    }
    if (!st->key) raise(g_giveup, "slot without recorded node bytes");
    cached = st->key;
    cached_range = {st->kb, st->ke};
    break;
  }
  size_t start = k.size();
  if (cached) {
    k.put_bytes(cached->data() + cached_range.first, cached_range.second - cached_range.first);
  } else {
    vis.visit(node, owner, ci, k);
    if (!cc.lifted_ivalue_args.args.empty()) raise(g_giveup, ci.name + ": lifted IValues");
    if (!opaque) {
      k.put<uint32_t>((uint32_t)cc.all_size_inputs.size());
      for (const auto& s : cc.all_size_inputs) k.put<int64_t>(s.value);
    }
    cc.all_size_inputs.clear();
  }
  w.ca_range[i] = {(uint32_t)start, (uint32_t)k.size()};
  for (int a = 0; a < (int)ci.attrs.size(); ++a) {
   const uint32_t a_begin = a ? attr_end[a - 1] : 0;
   for (uint32_t e = a_begin; e < attr_end[a]; ++e) {
    const One& o = svs[e];
    at::Tensor t;
    if (o.sv->has_hooks()) {
      auto st = our_slot(o.sv);
      if (!st) raise(g_giveup, "saved tensor with hooks that are not compiled_bw's");
      try {
        t = slot_unpack(*st);
      } catch (const c10::Error& e) {
        raise(PyExc_RuntimeError, e.what_without_backtrace());
      }
    } else if (cached) {
      // no compiled_args this time: unpack ourselves (eager's version check runs here)
      try {
        t = o.sv->unpack(owner);
      } catch (const c10::Error& e) {
        raise(PyExc_RuntimeError, e.what_without_backtrace());
      }
    } else {
      TensorArg* ta;
      try {
        ta = &cc.tensor_args.lookup(*o.sv);
      } catch (const c10::Error& e) {
        raise(g_giveup, ci.name + ": compiled_args did not collect saved " + ci.attrs[o.a].name);
      }
      if (ta->defined()) t = cc.tensor_args.inputs[ta->index()];
    }
    if (!t.defined()) {
      k.put<uint8_t>(0xEF);  // None
      continue;
    }
    k.put<uint8_t>(0xE1);
    tensor_key(k, t, t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj());
    w.saved_t.push_back(std::move(t));
    w.saved_src.push_back({o.sv, i, o.a, o.pos});
   }
   if (ci.attrs[a].offset < 0) k.put<uint32_t>(attr_end[a] - a_begin);
  }
}

std::shared_ptr<CWalk> walk(py::list roots) {
  auto w = std::make_shared<CWalk>();
  NodeIndex index;
  std::vector<int32_t> stack;
  Key k;
  auto see = [&](const NodePtr& n) -> int32_t {
    auto [j, fresh] = index.find_or_add(n.get(), (int32_t)w->nodes.size());
    if (fresh) {
      const char* p = reinterpret_cast<const char*>(n.get());
      for (int l = 0; l < 6; ++l) __builtin_prefetch(p + 64 * l);  // read when it is popped
      w->nodes.push_back(n);
      stack.push_back(j);
    }
    return j;
  };
  for (auto r : roots) {
    auto t = r.cast<py::tuple>();
    int32_t i = see(node_of(t[0].ptr()));
    w->root_edges.append(py::make_tuple(i, t[1]));
  }
  AutogradCompilerCall cc(SizeInput::STATIC);
  Visitor vis(cc);
  std::vector<uint64_t> seqs;
  std::vector<int32_t> seq_nodes;
  seqs.reserve(1024);
  seq_nodes.reserve(1024);
  w->edge_child.reserve(2048);
  w->edge_nr.reserve(2048);
  w->layout.reserve(5 * 1024);
  while (!stack.empty()) {
    int32_t i = stack.back();
    stack.pop_back();
    if (w->cls.size() < w->nodes.size()) {
      size_t cap = w->nodes.size() + 256;
      w->cls.resize(cap, nullptr);
      w->opaque.resize(cap, 0);
      w->edge_seg.resize(cap);
      w->ca_range.resize(cap);
    }
    Node* node = w->nodes[i].get();
    ClassInfo* ci = class_info(node, w->nodes[i]);
    if (ci->how == H_UNSUPPORTED) raise(g_unsupported, ci->reason);
    w->cls[i] = ci;
    w->layout.push_back((uint32_t)i);
    w->layout.push_back(ci->id);
    w->layout.push_back((uint32_t)k.size());
    k.put<uint32_t>((uint32_t)i);
    k.put<uint32_t>(ci->id);
    const auto& nexts = node->next_edges();
    const int32_t e_begin = (int32_t)w->edge_child.size();
    k.put<uint32_t>((uint32_t)nexts.size());
    for (const Edge& e : nexts) {
      int32_t j = -1;
      uint32_t nr = 0;
      if (e.function) {
        j = see(e.function);  // may reallocate w->nodes: node (raw) stays valid
        nr = e.input_nr;
      }
      w->edge_child.push_back(j);
      w->edge_nr.push_back((int32_t)nr);
      k.put<int32_t>(j);
      k.put<uint32_t>(nr);
    }
    w->edge_seg[i] = {e_begin, (int32_t)nexts.size()};
    w->layout.push_back((uint32_t)k.size());
    uint32_t n_in = node->num_inputs();
    k.put<uint32_t>(n_in);
    for (uint32_t s = 0; s < n_in; ++s) meta_key(k, node->input_metadata(s));
    w->layout.push_back((uint32_t)k.size());
    if (ci->how == H_LEAF) {
      const at::Tensor& var = static_cast<AccumulateGrad*>(node)->variable;
      PyObject* o = THPVariable_Wrap(var);
      if (!o) throw py::error_already_set();
      auto obj = py::reinterpret_steal<py::object>(o);
      tensor_key(k, var, o);
      k.put<uint8_t>(var.requires_grad());
      w->leaves[py::int_(i)] = obj;
      if (!node->tensor_pre_hooks().empty()) w->hook_leaves.append(i);
      if (!w->leaf_observed && !plain_accumulator(node)) w->leaf_observed = true;
      continue;
    }
    seqs.push_back(node->sequence_nr());
    seq_nodes.push_back(i);
    if (!node->tensor_pre_hooks().empty() || !node->pre_hooks().empty() ||
        !node->post_hooks().empty() || !node->retains_grad_hooks().empty())
      w->hook_nodes.append(i);
    const NodePtr& owner = w->nodes[i];  // no see() below: stays valid
    if (ci->how == H_PY) {
      py::list got;
      size_t keys_before = py::len(w->py_keys);
      py::object entry = g_py_node(i, node_obj(owner), got, w->py_keys, w->slot_only);
      w->py_entries.append(entry);
      if (py::len(got) != py::len(w->py_keys) - keys_before)
        raise(PyExc_AssertionError, "py_node: saved and keys out of step");
      for (size_t s = 0; s < py::len(got); ++s) {
        w->saved_t.push_back(THPVariable_Unpack(PyList_GET_ITEM(got.ptr(), s)));
        w->saved_src.push_back({nullptr, i, (int32_t)(keys_before + s), -1});
      }
      continue;
    }
    bool opq = ci->how == H_OPAQUE;
    if (!opq && !ci->rules.empty()) {
      static thread_local std::vector<int32_t> kids;
      kids.assign(w->edge_child.begin() + e_begin, w->edge_child.end());
      opq = hidden_state_unknown(*ci, kids);
    }
    w->opaque[i] = opq;
    collect_node(*w, cc, vis, i, node, owner, *ci, opq, k);
  }
  // Execution order (ENGINE.md 1.5): the permutation sorting the sequence numbers.
  std::vector<uint32_t> order(seqs.size());
  for (uint32_t s = 0; s < order.size(); ++s) order[s] = s;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return seqs[a] < seqs[b]; });
  for (uint32_t v : {0xFFFFFFFFu, 0u, (uint32_t)k.size(), (uint32_t)k.size(), (uint32_t)k.size()})
    w->layout.push_back(v);
  k.put<uint32_t>(0xFFFFFFFFu);
  for (auto o : order) k.put<int32_t>(seq_nodes[o]);
  const size_t n = w->nodes.size();
  w->cls.resize(n);
  w->opaque.resize(n, 0);
  w->edge_seg.resize(n);
  w->ca_range.resize(n);
  w->key = std::make_shared<const std::string>(k.take());
  w->hash = hash_bytes(*w->key);
  return w;
}

// ---- SlotList: the slots of one step, parallel to saved + slot_only ------------------------

struct SlotList {
  std::vector<std::shared_ptr<SlotState>> c;  // null for Python slots
  std::vector<py::object> p;                  // Python Slot or None
  std::vector<int32_t> node;
  size_t n_saved = 0;

  void set_placeholders(py::sequence phs) {
    TORCH_CHECK((size_t)py::len(phs) == n_saved, "placeholders: wrong count");
    for (size_t s = 0; s < n_saved; ++s) {
      if (c[s]) c[s]->placeholder = THPVariable_Unpack(phs[s].ptr());
      else p[s].attr("placeholder") = phs[s];
    }
  }
  void clear_placeholders() {
    for (size_t s = 0; s < c.size(); ++s) {
      if (c[s]) c[s]->placeholder = at::Tensor();
      else p[s].attr("placeholder") = py::none();
    }
  }
  void release_one(size_t s) {  // drops saved tensor s; a later unpack raises eager's error
    if (c.at(s)) {
      c[s]->value = at::Tensor();
      c[s]->released = true;
    } else {
      p.at(s).attr("release")();
    }
  }
  void release(py::iterable executed, size_t n_nodes) {
    std::vector<uint8_t> mask(n_nodes, 0);
    for (auto e : executed) mask.at(e.cast<size_t>()) = 1;
    for (size_t s = 0; s < c.size(); ++s)
      if (mask.at(node[s])) release_one(s);
  }
};

// py_slots: the Python Slots of the Python-read saved tensors, then of slot_only (same order as
// py_keys + slot_only); slot_only_nodes: their node indices.
std::shared_ptr<SlotList> install(CWalk& w, py::list py_slots, py::list slot_only_nodes) {
  auto sl = std::make_shared<SlotList>();
  sl->n_saved = w.saved_src.size();
  size_t n_all = sl->n_saved + py::len(slot_only_nodes);
  sl->c.reserve(n_all);
  sl->p.reserve(n_all);
  sl->node.reserve(n_all);
  for (const SavedSrc& s : w.saved_src) {
    sl->node.push_back(s.node);
    if (!s.sv) {
      sl->c.push_back(nullptr);
      sl->p.push_back(py_slots[s.attr]);
      continue;
    }
    sl->p.emplace_back();
    std::shared_ptr<SlotState> st;
    if (s.sv->has_hooks()) st = our_slot(s.sv);  // this graph was walked and slotted before
    if (!st) {
      st = std::make_shared<SlotState>();
      st->self = st;
      auto r = w.ca_range.at(s.node);
      if (r.second == 0) raise(PyExc_AssertionError, "install: no key bytes recorded for a node");
      st->key = w.key;
      st->kb = r.first;
      st->ke = r.second;
      try {
        const_cast<SavedVariable*>(s.sv)->register_hooks(std::make_unique<SlotHooks>(st));
      } catch (const c10::Error& e) {
        raise(PyExc_RuntimeError, e.what_without_backtrace());
      }
    }
    sl->c.push_back(std::move(st));
  }
  size_t n_py_keys = py::len(w.py_keys);
  for (size_t s = 0; s < (size_t)py::len(slot_only_nodes); ++s) {
    sl->node.push_back(slot_only_nodes[s].cast<int32_t>());
    sl->c.push_back(nullptr);
    sl->p.push_back(py_slots[n_py_keys + s]);
  }
  return sl;
}

}  // namespace

// ---- direct leaf delivery ------------------------------------------------------------------

// True when this AccumulateGrad can be called directly with eager's result: no hook of any kind
// (node pre/post, tensor pre, retain_grad, post-accumulate-grad), i.e. nothing that would run
// user code or observe the engine (runtime/run.py Note [Direct delivery]).
bool plain_accumulator(Node* n) {
  auto* acc = dynamic_cast<AccumulateGrad*>(n);
  return acc && n->pre_hooks().empty() && n->tensor_pre_hooks().empty() &&
         n->post_hooks().empty() && n->retains_grad_hooks().empty() &&
         !acc->tensor_post_acc_grad_hooks();
}

bool all_plain_accumulators(const std::vector<Node*>& nodes) {
  for (Node* n : nodes)
    if (!plain_accumulator(n)) return false;
  return true;
}

// Calls AccumulateGrad::apply as the engine does, the grad moved in so that it can be stolen;
// the caller holds grad mode off (at::NoGradGuard), as the engine does for every node.
void accumulate_one(Node* n, at::Tensor grad) {
  torch::autograd::variable_list in;
  in.push_back(std::move(grad));
  (*n)(std::move(in));
}

// accumulate_one for each (node, grad), emptying grads[i].  Returns false, touching nothing,
// when any node is not plain_accumulator.  None grads are skipped.
bool accumulate(const std::vector<Node*>& nodes, py::list grads) {
  TORCH_CHECK(nodes.size() == (size_t)py::len(grads), "accumulate: nodes and grads differ in length");
  if (!all_plain_accumulators(nodes)) return false;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < nodes.size(); ++i) {
    PyObject* g = PyList_GET_ITEM(grads.ptr(), i);
    if (g == Py_None) continue;
    at::Tensor t = THPVariable_Unpack(g);
    Py_INCREF(Py_None);
    PyList_SetItem(grads.ptr(), i, Py_None);  // drops our Python reference: stealable
    accumulate_one(nodes[i], std::move(t));
  }
  return true;
}

// Runs an AccumulateGrad node as engine.cpp's call_function runs it, with `grad` (undefined:
// no grad reached it) as its one input: tensor pre-hooks and retains_grad hooks, node pre-hooks,
// apply (which accumulates and runs the post-accumulate-grad hook), node post-hooks -- C++
// ones (DDP's reducer, FSDP's) included.  Called from inside the compiled graph, where eager
// runs the node (runtime/run.py Note [Delivery points]); the running graph task stays the
// current one, so hooks' queue_callback and _current_graph_task_id() see the backward's task.
void run_leaf(Node* fn, at::Tensor grad) {
  at::NoGradGuard no_grad;
  torch::autograd::variable_list inputs;
  inputs.push_back(std::move(grad));
  for (const auto& hook : fn->tensor_pre_hooks()) inputs = (*hook)(inputs);
  for (const auto& pair : fn->retains_grad_hooks()) inputs = (*pair.second)(inputs);
  for (const auto& hook : fn->pre_hooks()) inputs = (*hook)(inputs);
  if (fn->post_hooks().empty()) {
    (*fn)(std::move(inputs));
    return;
  }
  auto copy = inputs;
  torch::autograd::variable_list outputs = (*fn)(std::move(copy));
  for (const auto& hook : fn->post_hooks()) outputs = (*hook)(outputs, inputs);
}

// ---- the C++ hit path ----------------------------------------------------------------------

// Note [C++ hit path] (runtime/run.py): runs a graph Inductor compiled with its C++ wrapper on
// this walk's saved tensors and delivers the leaf grads, with no Python tensor in between.
// `entry` is the generated module's `inductor_entry`: it takes a list of PyCapsules holding
// AtenTensorHandles (heap at::Tensor*, stolen by the graph, which frees each after its last
// use) and returns one capsule (ours to steal) or None per output.  Inputs: the root grads,
// then the saved tensors (moved out of the walk: the graph holds the only reference, Note
// [Box ownership]).  backward() (accumulate): leaf k gets output leaf_pos[k] (None: no grad)
// through its AccumulateGrad (accumulate_one); returns True.  grad(): leaf_idx is empty
// and the result is the list of outputs at leaf_pos (None stays None), as Python tensors.
// Returns False, touching nothing, when the saved tensors are already in Python or some
// leaf's AccumulateGrad is not plain_accumulator.
py::object run_native(CWalk& w, py::handle entry, py::list roots, size_t n_inputs,
                      py::sequence leaf_idx_seq, py::sequence leaf_pos_seq, bool accumulate) {
  using torch::aot_inductor::new_tensor_handle;
  if (w.saved_in_py) return py::bool_(false);
  auto leaf_idx = py::reinterpret_steal<py::object>(PySequence_Fast(leaf_idx_seq.ptr(), "leaves"));
  auto leaf_pos = py::reinterpret_steal<py::object>(PySequence_Fast(leaf_pos_seq.ptr(), "positions"));
  if (!leaf_idx || !leaf_pos) throw py::error_already_set();
  const size_t n_leaves = PySequence_Fast_GET_SIZE(leaf_pos.ptr());
  TORCH_CHECK((size_t)PySequence_Fast_GET_SIZE(leaf_idx.ptr()) == (accumulate ? n_leaves : 0),
              "run_native: leaves and positions differ in length");
  std::vector<Node*> nodes(accumulate ? n_leaves : 0);
  for (size_t k = 0; k < nodes.size(); ++k)
    nodes[k] = w.nodes.at(PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(leaf_idx.ptr(), k))).get();
  if (!all_plain_accumulators(nodes)) return py::bool_(false);
  const size_t n_roots = py::len(roots);
  TORCH_CHECK(n_roots + w.saved_t.size() == n_inputs, "run_native: the compiled graph takes ",
              n_inputs, " inputs, this step has ", n_roots + w.saved_t.size());
  py::list handles(n_inputs);
  for (size_t r = 0; r < n_roots; ++r) {
    at::Tensor t = THPVariable_Unpack(PyList_GET_ITEM(roots.ptr(), r));
    PyList_SET_ITEM(handles.ptr(), r, PyCapsule_New(new_tensor_handle(std::move(t)), nullptr, nullptr));
  }
  for (size_t s = 0; s < w.saved_t.size(); ++s)
    PyList_SET_ITEM(handles.ptr(), n_roots + s,
                    PyCapsule_New(new_tensor_handle(std::move(w.saved_t[s])), nullptr, nullptr));
  w.saved_t.clear();
  w.saved_in_py = true;  // none left: a later `saved` is an empty list
  py::object res;
  {
    at::NoGradGuard no_grad;  // the engine runs nodes with grad mode off
    res = entry(std::move(handles));
  }
  py::list out = res.cast<py::list>();
  // The graph may return one handle at several positions: alloc_tensors_by_stealing_from_handles
  // frees each once (what the generated module's own wrapper calls).
  std::vector<AtenTensorHandle> out_handles(py::len(out), nullptr);
  for (size_t j = 0; j < out_handles.size(); ++j) {
    PyObject* c = PyList_GET_ITEM(out.ptr(), j);
    if (c != Py_None)
      out_handles[j] = reinterpret_cast<AtenTensorHandle>(PyCapsule_GetPointer(c, nullptr));
  }
  std::vector<at::Tensor> outs =
      torch::aot_inductor::alloc_tensors_by_stealing_from_handles(out_handles.data(), out_handles.size());
  if (!accumulate) {  // grad(): one Python tensor per position (a shared output: one object)
    py::list result(n_leaves);
    for (size_t k = 0; k < n_leaves; ++k) {
      PyObject* p = PySequence_Fast_GET_ITEM(leaf_pos.ptr(), k);
      PyObject* o = Py_None;
      const at::Tensor* g = p == Py_None ? nullptr : &outs.at(PyLong_AsSsize_t(p));
      if (g && g->defined()) {
        o = THPVariable_Wrap(*g);
        if (!o) throw py::error_already_set();
      } else {
        Py_INCREF(o);
      }
      PyList_SET_ITEM(result.ptr(), k, o);
    }
    return std::move(result);
  }
  // Last use of each output: an output two leaves share is moved only to the last one (the
  // first gets a second reference and so is not stolen: what the Python path does).
  std::vector<int64_t> pos(n_leaves, -1);
  std::vector<size_t> last(outs.size(), SIZE_MAX);
  for (size_t k = 0; k < n_leaves; ++k) {
    PyObject* p = PySequence_Fast_GET_ITEM(leaf_pos.ptr(), k);
    if (p == Py_None) continue;
    pos[k] = PyLong_AsSsize_t(p);
    last.at(pos[k]) = k;
  }
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < n_leaves; ++k) {
    if (pos[k] < 0 || !outs[pos[k]].defined()) continue;
    accumulate_one(nodes[k], last[pos[k]] == k ? std::move(outs[pos[k]]) : outs[pos[k]]);
  }
  return py::bool_(true);
}

// The streams the forward ran the nodes' ops on, as the engine reads them (InputMetadata::stream,
// which the engine makes a node's backward run on): distinct (device type, device index, stream
// id) of every non-CPU input metadata of the nodes.  runtime/streams.py compares them with the
// caller's current streams.
void add_streams(Node* n, std::set<std::tuple<std::string, int, int64_t>>& out) {
  for (uint32_t i = 0; i < n->num_inputs(); ++i) {
    const auto& m = n->input_metadata(i);
    if (m.device().is_cpu() || m.device().is_meta()) continue;
    auto st = m.stream();
    out.emplace(c10::DeviceTypeName(st.device_type(), /*lower_case=*/true), (int)st.device_index(),
                (int64_t)st.id());
  }
}

py::list stream_list(const std::set<std::tuple<std::string, int, int64_t>>& s) {
  py::list out;
  for (const auto& [t, i, id] : s) out.append(py::make_tuple(t, i, id));
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("init", [](py::object unsupported, py::object giveup, py::object classify,
                   py::object list_svs, py::object py_node) {
    g_unsupported = unsupported.inc_ref().ptr();
    g_marker = py::module_::import("builtins").attr("object")().inc_ref().ptr();
    g_giveup = giveup.inc_ref().ptr();
    g_classify = classify;
    g_list_svs = list_svs;
    g_py_node = py_node;
  });
  // Whether saved tensors carry hooks that are not compiled_bw's, without unpacking them (an
  // unpack hook is user code): a custom Function's (THPFunction) or a node's _raw_saved_<attr>s.
  m.def("saved_hooks_in", [](py::object node, py::iterable attrs) {
    auto foreign = [](const SavedVariable& sv) { return sv.has_hooks() && !our_slot(&sv); };
    if (THPFunction_Check(node.ptr())) {
      for (const auto& sv : ((THPFunction*)node.ptr())->saved_variables)
        if (foreign(sv)) return true;
      return false;
    }
    for (auto a : attrs) {
      py::object raw = node.attr(("_raw_saved_" + a.cast<std::string>()).c_str());
      if (py::isinstance<py::list>(raw) || py::isinstance<py::tuple>(raw)) {
        for (auto r : raw)
          if (!r.is_none() && foreign(*r.cast<SavedVariable*>())) return true;
      } else if (!raw.is_none() && foreign(*raw.cast<SavedVariable*>())) {
        return true;
      }
    }
    return false;
  });
  m.def("node_streams", [](py::iterable nodes) {
    std::set<std::tuple<std::string, int, int64_t>> s;
    for (auto n : nodes) add_streams(node_of(n.ptr()).get(), s);
    return stream_list(s);
  });
  m.def("node_address", [](py::object n) { return (size_t)node_of(n.ptr()).get(); });
  // What eager's engine does after running a node with retain_graph=False: frees its saved
  // variables (and so their hooks and packed objects).
  m.def("release_node", [](py::object n) { node_of(n.ptr())->release_variables(); });
  m.def("saved_variable_address", [](py::object sv) { return (size_t)sv.cast<SavedVariable*>(); });
  // compiled_args probe of one node, outside any walk: (ok, message).
  m.def("probe_compiled_args", [](py::object n) {
    auto owner = node_of(n.ptr());
    AutogradCompilerCall cc(SizeInput::STATIC);
    NodeCall call(0, owner);
    CompiledNodeArgs args(cc, call);
    try {
      owner->compiled_args(args);
    } catch (const std::exception& e) {
      return py::make_tuple(false, std::string(e.what()).substr(0, 300));
    }
    return py::make_tuple(true, std::string());
  });
  // For tests: (key bytes, lifted sizes, collected tensors) of one node's compiled_args.
  m.def("compiled_args_of", [](py::object n) {
    auto owner = node_of(n.ptr());
    AutogradCompilerCall cc(SizeInput::STATIC);
    NodeCall call(0, owner);
    CompiledNodeArgs args(cc, call);
    owner->compiled_args(args);
    auto ck = args.key();
    py::list sizes;
    for (auto& s : cc.all_size_inputs) sizes.append(s.value);
    return py::make_tuple(py::bytes((const char*)ck.key, ck.key_size), sizes,
                          cc.tensor_args.inputs);
  });
  m.def("walk", &walk);
  m.def("accumulate_nodes", [](py::list nodes, py::list grads) {
    std::vector<NodePtr> own;
    std::vector<Node*> raw;
    for (auto n : nodes) {
      own.push_back(node_of(n.ptr()));
      raw.push_back(own.back().get());
    }
    return accumulate(raw, grads);
  });
  // steal: the grad's only other holders are compiled_bw's (runtime/run.py Note [Stealing at
  // delivery points]): the node gets a fresh alias of it, which it may take as eager would.
  m.def("run_leaf", [](py::object node, py::object grad, bool steal) {
    NodePtr own = node_of(node.ptr());
    TORCH_CHECK(dynamic_cast<AccumulateGrad*>(own.get()), "run_leaf: not an AccumulateGrad node");
    at::Tensor g = grad.is_none() ? at::Tensor() : THPVariable_Unpack(grad.ptr());
    if (steal && g.defined()) g = g.detach();
    try {
      py::gil_scoped_release no_gil;  // as the engine runs nodes: hooks take the GIL themselves
      run_leaf(own.get(), std::move(g));
    } catch (python_error& e) {       // a Python hook raised: re-raise that exception
      e.restore();
      throw py::error_already_set();
    }
  }, py::arg("node"), py::arg("grad"), py::arg("steal") = false);
  // Eager's retain_graph=False for nodes the Python walk found (custom Functions run opaquely).
  m.def("release_nodes", [](py::iterable nodes) {
    for (auto n : nodes) node_of(n.ptr())->release_variables();
  });
  m.def("leaves_observed", [](py::list nodes) {
    for (auto n : nodes)
      if (!plain_accumulator(node_of(n.ptr()).get())) return true;
    return false;
  });
  m.def("class_kind", [](uint32_t id) { return g_class_list.at(id)->kind; });

  py::class_<CWalk, std::shared_ptr<CWalk>>(m, "CWalk")
      .def_property_readonly("saved", [](CWalk& w) {
        if (!w.saved_in_py) {
          for (auto& t : w.saved_t) {
            PyObject* o = THPVariable_Wrap(std::move(t));
            if (!o) throw py::error_already_set();
            w.saved.append(py::reinterpret_steal<py::object>(o));
          }
          w.saved_t.clear();
          w.saved_in_py = true;
        }
        return w.saved;
      })
      .def_readonly("py_keys", &CWalk::py_keys)
      .def_readonly("slot_only", &CWalk::slot_only)
      .def_readonly("leaves", &CWalk::leaves)
      .def_readonly("hook_nodes", &CWalk::hook_nodes)
      .def_readonly("hook_leaves", &CWalk::hook_leaves)
      .def_readonly("leaf_observed", &CWalk::leaf_observed)
      .def_readonly("py_entries", &CWalk::py_entries)
      .def_readonly("root_edges", &CWalk::root_edges)
      .def_readonly("hash", &CWalk::hash)
      .def_property_readonly("key", [](CWalk& w) { return py::bytes(*w.key); })
      .def_property_readonly("layout", [](CWalk& w) {
        return py::bytes((const char*)w.layout.data(), w.layout.size() * 4);
      })
      .def("__len__", [](CWalk& w) { return w.nodes.size(); })
      .def("node", [](CWalk& w, size_t i) {
        if (w.pynodes.size() != w.nodes.size()) w.pynodes.resize(w.nodes.size());
        auto& o = w.pynodes.at(i);
        if (!o) o = node_obj(w.nodes[i]);
        return o;
      })
      .def("nodes", [](CWalk& w) {
        if (w.pynodes.size() != w.nodes.size()) w.pynodes.resize(w.nodes.size());
        py::list out(w.nodes.size());
        for (size_t i = 0; i < w.nodes.size(); ++i) {
          if (!w.pynodes[i]) w.pynodes[i] = node_obj(w.nodes[i]);
          out[i] = w.pynodes[i];
        }
        return out;
      })
      .def("edges", [](CWalk& w) {
        py::list out(w.nodes.size());
        for (size_t i = 0; i < w.nodes.size(); ++i) {
          auto [b, cnt] = w.edge_seg[i];
          py::tuple es(cnt);
          for (int32_t e = 0; e < cnt; ++e) {
            int32_t c = w.edge_child[b + e];
            es[e] = py::make_tuple(c, c < 0 ? 0 : w.edge_nr[b + e]);
          }
          out[i] = es;
        }
        return out;
      })
      .def("class_ids", [](CWalk& w) {
        py::list out(w.nodes.size());
        for (size_t i = 0; i < w.nodes.size(); ++i) out[i] = w.cls[i]->id;
        return out;
      })
      .def("opaque", [](CWalk& w) {
        py::list out(w.nodes.size());
        for (size_t i = 0; i < w.nodes.size(); ++i) out[i] = (int)w.opaque[i];
        return out;
      })
      .def("saved_keys", [](CWalk& w) {  // (node index, attr, list position | -1) per saved
        py::list out(w.saved_src.size());
        for (size_t s = 0; s < w.saved_src.size(); ++s) {
          const SavedSrc& src = w.saved_src[s];
          if (!src.sv) out[s] = w.py_keys[src.attr];
          else out[s] = py::make_tuple(src.node, w.cls[src.node]->attrs[src.attr].name, src.pos);
        }
        return out;
      })
      // Eager's retain_graph=False: Node::release_variables() on each executed node (frees
      // its saved variables; a later unpack raises "backward through the graph a second time").
      .def("streams", [](CWalk& w) {
        std::set<std::tuple<std::string, int, int64_t>> s;
        for (const auto& n : w.nodes) add_streams(n.get(), s);
        return stream_list(s);
      })
      .def("release_variables", [](CWalk& w, py::iterable executed) {
        for (auto e : executed) w.nodes.at(e.cast<size_t>())->release_variables();
      })
      .def("accumulate", [](CWalk& w, py::list leaf_idx, py::list grads) {
        std::vector<Node*> raw;
        for (auto e : leaf_idx) raw.push_back(w.nodes.at(e.cast<size_t>()).get());
        return accumulate(raw, grads);
      })
      .def("run_native", &run_native)
      .def("install", [](CWalk& w, py::list py_slots, py::list slot_only_nodes) {
        return install(w, py_slots, slot_only_nodes);
      });

  py::class_<SlotList, std::shared_ptr<SlotList>>(m, "SlotList")
      .def("__len__", [](SlotList& s) { return s.c.size(); })
      .def("set_placeholders", &SlotList::set_placeholders)
      .def("clear_placeholders", &SlotList::clear_placeholders)
      .def("release", &SlotList::release)
      // Note [Box ownership] (runtime/run.py): drop these saved positions before the run
      .def("release_positions", [](SlotList& s, py::iterable ks) {
        for (auto k : ks) s.release_one(k.cast<size_t>());
      });
}
