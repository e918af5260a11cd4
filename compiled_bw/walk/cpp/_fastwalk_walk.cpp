// The C++ walk: per-class facts, the key, the walk (declarations in _fastwalk.h).  Consumes the
// root edges of one backward; produces a CWalk: the nodes in the Python walk's discovery order,
// their classes, edges and saved tensors, and the key (bytes) with its hash; then, for the nodes
// with hooks, their NodeHooks and signature parts (hook_entries).
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
#include "_fastwalk.h"

#include <cstring>

#include <torch/csrc/autograd/python_anomaly_mode.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

using torch::dynamo::autograd::AutogradCompilerCall;
using torch::dynamo::autograd::CompiledNodeArgs;
using torch::dynamo::autograd::NodeCall;
using torch::dynamo::autograd::SizeInput;
using torch::dynamo::autograd::TensorArg;

namespace compiled_bw::fastwalk {

// Python exception classes, set by init().
PyObject* g_unsupported = nullptr;  // WalkUnsupported: the fallback reason
PyObject* g_giveup = nullptr;       // GiveUp: the C++ walk cannot do this step; use Python's

// ---- per-class facts, learned once per C++ node type (Python classifies) ----------------

std::vector<ClassInfo*> g_class_list;
// Python callbacks (heap-allocated and never freed: no decref after interpreter shutdown).
py::object& g_classify = *new py::object();  // classify(node, address) -> class facts
py::object& g_list_svs = *new py::object();  // list_svs(node, attr) -> [SavedVariable address]
py::object& g_py_node = *new py::object();   // py_node(i, node, saved, py_keys, slot_only) ->
                                             // (entry, kind, memo | None)

NodePtr node_of(PyObject* o) {
  if (torch::autograd::THPCppFunction_Check(o))
    return owning(((torch::autograd::THPCppFunction*)o)->cdata);
  if (THPFunction_Check(o)) {
    // On releases where THPFunction holds a weak_ptr (2.11), a Python Function object can
    // outlive its node (the graph was freed): say so instead of handing out a null node.
    NodePtr n = owning(((THPFunction*)o)->cdata);
    if (!n)
      raise(PyExc_RuntimeError, "compiled_bw fastwalk: this autograd Function's node was freed");
    return n;
  }
  raise(PyExc_TypeError, "compiled_bw fastwalk: not an autograd node");
}

py::object node_obj(const NodePtr& n) {
  PyObject* o = torch::autograd::functionToPyObject(n);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

namespace {

std::unordered_map<const std::type_info*, ClassInfo*> g_classes;  // type_info is unique per type

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
    if (py::isinstance<py::str>(t[0]) && t[0].cast<std::string>() == "offsets")
      ru.offsets = true;
    else if (py::isinstance<py::str>(t[0]))
      ru.src_all = true;
    else
      for (auto k : t[0].cast<py::tuple>()) ru.src.push_back(k.cast<int>());
    if (py::isinstance<py::str>(t[1]))
      ru.users_all = true;
    else
      for (auto k : t[1].cast<py::tuple>()) ru.users.push_back(k.cast<int>());
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
    if (r.offsets) {  // some valid edge with invalid ones on both sides (nodes.py _offset_unknown)
      size_t first = n, last = 0;
      for (size_t k = 0; k < n; ++k)
        if (kids[k] < 0) {
          if (first == n) first = k;
          last = k;
        }
      if (first == n) return false;
      for (size_t k = first; k <= last; ++k)
        if (kids[k] >= 0) return true;
      return false;
    }
    bool used = false, known = true;
    if (r.users_all) {
      for (auto c : kids) used |= c >= 0;
    } else {
      for (int u : r.users)
        if ((size_t)u < n && kids[u] >= 0) used = true;
    }
    if (r.src_all) {
      for (auto c : kids) known &= c >= 0;
    } else {
      for (int k : r.src)
        if ((size_t)k < n && kids[k] < 0) known = false;
    }
    if (used && !known) return true;
  }
  return false;
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
  if (t._is_zerotensor())  // walk.py Note [ZeroTensors]
    raise(g_unsupported,
          "an efficient ZeroTensor (torch._efficientzerotensor: no storage; a jvp's tangent of "
          "a captured tensor, a create_graph zero grad) in the graph");
  // Tensor subclasses are flattened at the graph boundary by the Python walk (subclass.py,
  // Note [Subclasses stay outside the graph]); it also gives the fallback reason for those it
  // cannot flatten.  The reason's text before ": " is the give-up counter's key.
  PyTypeObject* tp = obj ? Py_TYPE(obj) : (PyTypeObject*)THPVariableClass;
  if (tp != (PyTypeObject*)THPVariableClass && tp != (PyTypeObject*)ParameterClass)
    raise(g_giveup, std::string("tensor subclass in the graph: ") +
                        py::str(py::handle((PyObject*)tp).attr("__name__")).cast<std::string>());
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

// One node's compiled_args visit, with its own AutogradCompilerCall: the TensorArg ids the key
// holds (compiled_args deduplicates saved tensors by TensorImpl and keys on the ids) count from
// the node's first saved tensor, not from the walk's.  So a node's bytes do not depend on where
// in the walk it is met, and the bytes recorded when slots were installed (a retained graph's
// first walk) equal a later walk's fresh bytes of the same node (Note [Node-local tensor ids]).
struct Visitor {
  NodeCall call;
  std::optional<AutogradCompilerCall> cc;
  std::optional<CompiledNodeArgs> args;
  Visitor() : call(0, NodePtr()) {}
  // Appends node's compiled_args bytes to k (size-prefixed); its sizes and tensors stay in cc
  // until the next visit.  False, appending nothing: a backward with retain_graph=False ran the
  // node and freed its saved tensors (Note [Released nodes] in walk/fastwalk.py).
  bool visit(Node* node, const NodePtr& owner, const ClassInfo& ci, Key& k) {
    args.reset();  // (it refers to cc)
    cc.emplace(SizeInput::STATIC);
    args.emplace(*cc, call);
    call.node = owner;
    try {
      node->compiled_args(*args);
    } catch (const c10::Error& e) {  // also eager's errors (saved tensor modified in place):
      // the Python walk meets those again and reports them as eager would
      const char* what = e.what_without_backtrace();
      if (std::strstr(what, "backward through the graph a second time")) return false;
      raise(g_giveup, ci.name + "::compiled_args raised: " + what);
    }
    auto ck = args->key();
    const uint32_t n = ck.key_size;  // < 64 KB per node (CacheKey::key_size is a uint16_t)
    k.put<uint32_t>(n);
    k.put_bytes(ck.key, n);
    return true;
  }
};

// One node's part of the key: its compiled_args bytes and sizes, then its saved tensors.  A
// node whose saved tensors already carry our slots (a retained graph walked again) reuses the
// bytes recorded at install: compiled_args would take its hooks path and write other bytes.
void collect_node(CWalk& w, Visitor& vis, int i, Node* node, const NodePtr& owner,
                  const ClassInfo& ci, bool opaque, Key& k) {
  // The SavedVariables, in the Python walk's order: per attr, its element(s).
  struct One {
    const SavedVariable* sv;
    int a;
    int pos;
  };
  static thread_local std::vector<One> svs;
  static thread_local std::vector<uint32_t> attr_end;  // per attr: end of its elements in svs
  svs.clear();
  attr_end.clear();
  for (int a = 0; a < (int)ci.attrs.size(); ++a) {
    const Attr& at = ci.attrs[a];
    if (at.offset >= 0) {
      svs.push_back(
          {reinterpret_cast<const SavedVariable*>(reinterpret_cast<const char*>(node) + at.offset),
           a, -1});
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
    if (!vis.visit(node, owner, ci, k)) {
      k.put<uint8_t>(0xDE);  // released: no compiled_args, no saved tensors
      w.opaque[i] = 3;
      w.ca_range[i] = {(uint32_t)start, (uint32_t)k.size()};
      return;
    }
    const AutogradCompilerCall& cc = *vis.cc;
    if (!cc.lifted_ivalue_args.args.empty()) raise(g_giveup, ci.name + ": lifted IValues");
    if (!opaque) {
      k.put<uint32_t>((uint32_t)cc.all_size_inputs.size());
      for (const auto& s : cc.all_size_inputs) k.put<int64_t>(s.value);
    }
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
          t = w.history ? o.sv->unpack(owner) : slot_unpack(*st);
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
          ta = &vis.cc->tensor_args.lookup(*o.sv);
        } catch (const c10::Error& e) {
          raise(g_giveup, ci.name + ": compiled_args did not collect saved " + ci.attrs[o.a].name);
        }
        if (ta->defined()) t = vis.cc->tensor_args.inputs[ta->index()];
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

}  // namespace

// ---- custom Function nodes on a cache hit (Note [Custom node memo] in walk/fastwalk.py) --

namespace {

// Interned names and the types the comparison knows, set by memo_init.
struct MemoNames {
  py::object metadata, dict, fwd_key, mat_key, slots_key, is_var, subclass, backward,
      clear_on_access, needs_input_grad, out_info;
  PyObject *size_t_ = nullptr, *dtype_t = nullptr, *device_t = nullptr, *layout_t = nullptr,
           *mformat_t = nullptr;
};
MemoNames& g_mn = *new MemoNames();
bool g_memo_ready = false;
uint64_t g_memo_hits = 0;  // entries taken from a memo (tests: the memo is used)

struct CustomMemo {
  py::object cls, fwd_cls, kind, entry, is_var, subclass, materialize, needs_input_grad, out_info;
  uint32_t n_out = 0;
  std::vector<std::pair<py::object, py::object>> ctx;  // the ctx's __dict__, in order
  // the backward's constant key (custom.py Note [Constant function keys]): function, code,
  // globals, and (name, value | null when absent) per global name it may read
  bool has_bkey = false;
  py::object fn, code, globals;
  std::vector<std::pair<py::object, py::object>> gvals;
  std::vector<uint8_t> defined;        // per saved tensor
  bool keyed = false;                  // saved tensors are graph inputs (else slot-only)
  std::vector<py::object> saved_keys;  // (i, "tensors", j) per saved tensor
  std::string metas;                   // keyed: the defined saved tensors' metadata bytes
};

struct MemoHash {
  size_t operator()(const std::pair<PyObject*, int32_t>& p) const {
    return std::hash<uintptr_t>()((uintptr_t)p.first) ^ (size_t)p.second * 0x9E3779B97F4A7C15ull;
  }
};
std::unordered_map<std::pair<PyObject*, int32_t>, std::shared_ptr<CustomMemo>, MemoHash>& g_memos =
    *new std::unordered_map<std::pair<PyObject*, int32_t>, std::shared_ptr<CustomMemo>, MemoHash>();

// Equal for the key: the same exact type and value (Note [Custom node memo]); anything else
// (a user object, a function, a tensor) is never equal here.
bool same_value(PyObject* a, PyObject* b, int depth) {
  PyTypeObject* t = Py_TYPE(a);
  if (t != Py_TYPE(b) || depth > 4) return false;
  if (a == Py_None || t == &PyBool_Type) return a == b;
  if (t == &PyLong_Type || t == &PyUnicode_Type || (PyObject*)t == g_mn.device_t) {
    if (a == b) return true;
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) {
      PyErr_Clear();
      return false;
    }
    return r == 1;
  }
  if (t == &PyFloat_Type) {
    double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
    return std::memcmp(&x, &y, sizeof(double)) == 0;
  }
  if ((PyObject*)t == g_mn.dtype_t || (PyObject*)t == g_mn.layout_t ||
      (PyObject*)t == g_mn.mformat_t)
    return a == b;
  if (t == &PyTuple_Type || (PyObject*)t == g_mn.size_t_) {
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    if (n != PyTuple_GET_SIZE(b)) return false;
    for (Py_ssize_t j = 0; j < n; ++j)
      if (!same_value(PyTuple_GET_ITEM(a, j), PyTuple_GET_ITEM(b, j), depth + 1)) return false;
    return true;
  }
  if (t == &PyList_Type) {
    Py_ssize_t n = PyList_GET_SIZE(a);
    if (n != PyList_GET_SIZE(b)) return false;
    for (Py_ssize_t j = 0; j < n; ++j)
      if (!same_value(PyList_GET_ITEM(a, j), PyList_GET_ITEM(b, j), depth + 1)) return false;
    return true;
  }
  return false;
}

// A strided, dense, plain tensor's metadata bytes (tensor_key's), or false.
bool plain_meta(Key& k, const at::Tensor& t, PyObject* obj) {
  if (t.layout() != at::kStrided || t.is_nested() || t._is_zerotensor()) return false;
  PyTypeObject* tp = obj ? Py_TYPE(obj) : (PyTypeObject*)THPVariableClass;
  if (tp != (PyTypeObject*)THPVariableClass && tp != (PyTypeObject*)ParameterClass) return false;
  tensor_key(k, t, obj);
  return true;
}

// getattr, or null (the error cleared).
py::object attr_or_null(PyObject* o, const py::object& name) {
  PyObject* r = PyObject_GetAttr(o, name.ptr());
  if (!r) PyErr_Clear();
  return py::reinterpret_steal<py::object>(r);
}

// Note [Custom node memo]: whether node i (a custom Function's PyNode, Python object obj) has
// exactly what its memo was made from; if so, its entry, kind and saved tensors are taken.
bool memo_hit(CWalk& w, int32_t i, PyObject* obj, Node* node, const NodePtr& owner,
              py::dict& kinds) {
  if (!g_memo_ready || !THPFunction_Check(obj)) return false;
  auto it = g_memos.find({(PyObject*)Py_TYPE(obj), i});
  if (it == g_memos.end()) return false;
  std::shared_ptr<CustomMemo> m = it->second;  // user code below may change the map
  THPFunction* f = (THPFunction*)obj;
  if (f->has_freed_buffers || f->saved_for_forward || node->num_inputs() != m->n_out ||
      f->saved_variables.size() != m->defined.size())
    return false;
  // what the forward recorded, our own slots, set_materialize_grads (node.metadata)
  py::object md = attr_or_null(obj, g_mn.metadata);
  if (!md || !PyDict_Check(md.ptr())) return false;
  PyObject* info = PyDict_GetItemWithError(md.ptr(), g_mn.fwd_key.ptr());
  if (!info || PyDict_GetItemWithError(md.ptr(), g_mn.slots_key.ptr())) {
    PyErr_Clear();
    return false;
  }
  PyObject* mat = PyDict_GetItemWithError(md.ptr(), g_mn.mat_key.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  if (mat != m->materialize.ptr()) return false;  // True / False / absent (null)
  py::object is_var = attr_or_null(info, g_mn.is_var);
  py::object sub = attr_or_null(info, g_mn.subclass);
  if (!is_var || !sub || sub.ptr() != m->subclass.ptr() ||
      !same_value(is_var.ptr(), m->is_var.ptr(), 0))
    return false;
  // each output's (shape, dtype, device): zeros of a non-differentiable one are in the entry
  // (walk/walk.py Note [Zeros of a non-differentiable output])
  py::object out_info = attr_or_null(info, g_mn.out_info);
  if (!out_info || !same_value(out_info.ptr(), m->out_info.ptr(), 0)) return false;
  // read through the attribute: from torch 2.14 on, THPFunction keeps it as bits until the
  // tuple is first asked for (f->needs_input_grad is null until then)
  py::object nig = attr_or_null(obj, g_mn.needs_input_grad);
  if (!nig || !same_value(nig.ptr(), m->needs_input_grad.ptr(), 0)) return false;
  // the Function class: clear_saved_tensors_on_access, the backward and its globals
  py::object cso = attr_or_null(m->fwd_cls.ptr(), g_mn.clear_on_access);
  if (!cso || PyObject_IsTrue(cso.ptr()) != 0) {
    PyErr_Clear();
    return false;
  }
  if (m->has_bkey) {
    py::object fn = attr_or_null(m->fwd_cls.ptr(), g_mn.backward);
    if (!fn || fn.ptr() != m->fn.ptr() || !PyFunction_Check(fn.ptr())) return false;
    if (PyFunction_GET_CODE(fn.ptr()) != m->code.ptr() || PyFunction_GET_DEFAULTS(fn.ptr()) ||
        PyFunction_GET_KW_DEFAULTS(fn.ptr()) ||
        PyFunction_GET_GLOBALS(fn.ptr()) != m->globals.ptr())
      return false;
    for (const auto& [name, v] : m->gvals) {
      PyObject* now = PyDict_GetItemWithError(m->globals.ptr(), name.ptr());
      if (!now && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      if (now != v.ptr()) return false;
    }
  }
  // the ctx's attributes, in the same order with the same values
  py::object d = attr_or_null(obj, g_mn.dict);
  if (!d || !PyDict_Check(d.ptr()) || PyDict_GET_SIZE(d.ptr()) != (Py_ssize_t)m->ctx.size())
    return false;
  {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    size_t j = 0;
    while (PyDict_Next(d.ptr(), &pos, &key, &value)) {
      const auto& [mk, mv] = m->ctx[j++];
      if (key != mk.ptr() &&
          (!PyUnicode_CheckExact(key) || PyUnicode_Compare(key, mk.ptr()) != 0)) {
        PyErr_Clear();
        return false;
      }
      if (!same_value(value, mv.ptr(), 0)) return false;
    }
  }
  // the saved tensors: unpacked as node.saved_tensors does (eager's checks; an error is left
  // to the Python entry, which raises it), None where they were, plain, same metadata
  static thread_local std::vector<at::Tensor> ts;
  ts.clear();
  static thread_local Key mk;
  mk.n = 0;
  for (size_t j = 0; j < f->saved_variables.size(); ++j) {
    const SavedVariable& sv = f->saved_variables[j];
    if (sv.has_hooks()) return false;
    at::Tensor t;
    try {
      t = sv.unpack(owner);
    } catch (const c10::Error&) {
      return false;
    }
    if (t.defined() != (bool)m->defined[j]) return false;
    if (!t.defined()) continue;
    PyObject* tobj = t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj();
    if (m->keyed) {
      if (!plain_meta(mk, t, tobj)) return false;
    } else {
      PyTypeObject* tp = tobj ? Py_TYPE(tobj) : (PyTypeObject*)THPVariableClass;
      if (tp != (PyTypeObject*)THPVariableClass && tp != (PyTypeObject*)ParameterClass)
        return false;
    }
    ts.push_back(std::move(t));
  }
  if (m->keyed && (mk.n != m->metas.size() || std::memcmp(mk.b.data(), m->metas.data(), mk.n) != 0))
    return false;
  // a hit: what the Python entry would have produced
  size_t t_pos = 0;
  for (size_t j = 0; j < m->defined.size(); ++j) {
    if (!m->defined[j]) continue;
    if (m->keyed) {
      w.saved_src.push_back({nullptr, i, (int32_t)py::len(w.py_keys), -1});
      w.py_keys.append(m->saved_keys[j]);
      w.saved_t.push_back(std::move(ts[t_pos]));
    } else {
      w.slot_only.append(m->saved_keys[j]);
    }
    ++t_pos;
  }
  ts.clear();
  ++g_memo_hits;
  w.py_entries.append(m->entry);
  kinds[py::int_(i)] = m->kind;
  return true;
}

// After the Python entry of node i: remember what it was made from (memo: the tuple
// walk/fastwalk.py _memo_of builds, or None: forget node i's memo).
void memo_store(int32_t i, PyObject* obj, py::handle memo, py::list got) {
  std::pair<PyObject*, int32_t> key{(PyObject*)Py_TYPE(obj), i};
  if (memo.is_none() || !g_memo_ready) {
    g_memos.erase(key);
    return;
  }
  auto m = std::make_shared<CustomMemo>();
  auto t = memo.cast<py::tuple>();
  m->cls = py::reinterpret_borrow<py::object>((PyObject*)Py_TYPE(obj));
  m->fwd_cls = t[0];
  m->kind = t[1];
  m->entry = t[2];
  m->is_var = t[3];
  m->subclass = t[4];
  m->n_out = t[5].cast<uint32_t>();
  for (auto kv : t[6].cast<py::tuple>()) {
    auto p = kv.cast<py::tuple>();
    m->ctx.emplace_back(p[0], p[1]);
  }
  if (!t[7].is_none()) m->materialize = t[7];
  m->needs_input_grad = t[8];
  if (!t[9].is_none()) {
    auto b = t[9].cast<py::tuple>();
    m->has_bkey = true;
    m->fn = b[0];
    m->code = b[1];
    m->globals = b[2];
    for (auto nv : b[3].cast<py::tuple>()) {
      auto p = nv.cast<py::tuple>();
      m->gvals.emplace_back(p[0], p[1].cast<bool>() ? py::object(p[2]) : py::object());
    }
  }
  for (auto dflt : t[10].cast<py::tuple>()) m->defined.push_back(dflt.cast<bool>());
  m->keyed = t[11].cast<bool>();
  for (auto sk : t[12].cast<py::tuple>())
    m->saved_keys.push_back(py::reinterpret_borrow<py::object>(sk));
  m->out_info = t[13];
  if (m->keyed) {
    Key mk;
    for (size_t s = 0; s < py::len(got); ++s) {
      PyObject* o = PyList_GET_ITEM(got.ptr(), s);
      if (!plain_meta(mk, THPVariable_Unpack(o), o)) {
        g_memos.erase(key);
        return;
      }
    }
    m->metas.assign(mk.b.data(), mk.n);
  }
  g_memos[key] = std::move(m);
}

}  // namespace

void memo_init(py::tuple names) {
  g_mn.metadata = py::str("metadata");
  g_mn.dict = py::str("__dict__");
  g_mn.is_var = py::str("is_var");
  g_mn.subclass = py::str("subclass");
  g_mn.backward = py::str("backward");
  g_mn.clear_on_access = py::str("clear_saved_tensors_on_access");
  g_mn.needs_input_grad = py::str("needs_input_grad");
  g_mn.out_info = py::str("out_info");
  g_mn.fwd_key = names[0];
  g_mn.mat_key = names[1];
  g_mn.slots_key = names[2];
  g_mn.size_t_ = py::object(names[3]).release().ptr();
  g_mn.dtype_t = py::object(names[4]).release().ptr();
  g_mn.device_t = py::object(names[5]).release().ptr();
  g_mn.layout_t = py::object(names[6]).release().ptr();
  g_mn.mformat_t = py::object(names[7]).release().ptr();
  g_memo_ready = true;
}

void memo_clear() { g_memos.clear(); }

py::tuple memo_stats() { return py::make_tuple(g_memos.size(), g_memo_hits); }

std::shared_ptr<CWalk> walk(py::list roots, py::dict kinds, bool history) {
  auto w = std::make_shared<CWalk>();
  w->history = history;
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
  Visitor vis;
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
        !node->post_hooks().empty() || !node->retains_grad_hooks().empty()) {
      bool unseen = false;
      if (const char* what = foreign_hook(node, &unseen))
        raise(g_unsupported, hook_reason(node, what, unseen));
      w->hook_nodes.append(i);
    }
    const NodePtr& owner = w->nodes[i];  // no see() below: stays valid
    if (ci->how == H_PY) {
      py::object obj = node_obj(owner);
      if (memo_hit(*w, i, obj.ptr(), node, owner, kinds)) continue;
      py::list got;
      size_t keys_before = py::len(w->py_keys);
      py::tuple r = g_py_node(i, obj, got, w->py_keys, w->slot_only);
      w->py_entries.append(py::object(r[0]));
      kinds[py::int_(i)] = py::object(r[1]);
      if (py::len(got) != py::len(w->py_keys) - keys_before)
        raise(PyExc_AssertionError, "py_node: saved and keys out of step");
      if (THPFunction_Check(obj.ptr())) memo_store(i, obj.ptr(), py::object(r[2]), got);
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
    collect_node(*w, vis, i, node, owner, *ci, opq, k);
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

}  // namespace compiled_bw::fastwalk

namespace compiled_bw::fastwalk {

std::pair<PyObject*, PyObject*> hook_dicts_of(Node* fn) {
  PyObject* pre = nullptr;
  PyObject* post = nullptr;
  for (const auto& h : fn->pre_hooks())
    if (std::strcmp(typeid(*h).name(), "N5torch8autograd17PyFunctionPreHookE") == 0) {
      pre = static_cast<torch::autograd::PyFunctionPreHook*>(h.get())->dict;
      break;
    }
  for (const auto& h : fn->post_hooks())
    if (std::strcmp(typeid(*h).name(), "N5torch8autograd18PyFunctionPostHookE") == 0) {
      post = static_cast<torch::autograd::PyFunctionPostHook*>(h.get())->dict;
      break;
    }
  return {pre, post};
}

namespace {

// hooks.py _ident of each hook of a dict, in the dict's own order (PyDict_Next, as eager's
// PyFunction*Hook iterate it): a plain function's __code__, else what `ident` answers.
py::tuple idents_of(PyObject* d, PyObject* ident) {
  py::tuple out(PyDict_Size(d));
  Py_ssize_t pos = 0, k = 0;
  PyObject *key, *value;
  while (PyDict_Next(d, &pos, &key, &value)) {
    PyObject* id;
    if (Py_TYPE(value) == &PyFunction_Type) {
      id = PyFunction_GET_CODE(value);
      Py_INCREF(id);
    } else {
      id = PyObject_CallOneArg(ident, value);
      if (!id) throw py::error_already_set();
    }
    PyTuple_SET_ITEM(out.ptr(), k++, id);
  }
  return out;
}

// `node.metadata`, the dict compiled_bw records hooks in (borrowed; a dict unless the anomaly
// mode's metadata class is another's)
PyObject* metadata_dict(Node* node) {
  return static_cast<torch::autograd::PyAnomalyMetadata*>(node->metadata())->dict();
}

}  // namespace

const char* foreign_hook(Node* node, bool* unseen) {
  *unseen = false;
  if (const char* what = foreign_hook(node)) return what;
  if (node->tensor_pre_hooks().empty()) return nullptr;
  // Note [Hooks registered before compiled_bw]: Python tensor hooks without our record
  PyObject* md = metadata_dict(node);
  if (!PyDict_Check(md)) return nullptr;
  PyObject* recs = PyDict_GetItemString(md, TENSOR_HOOKS_KEY);  // borrowed: [(slot, dict)]
  // each recorded dict is one PyFunctionTensorPreHook (Tensor.register_hook's first call)
  if (recs && PyList_Check(recs) &&
      (size_t)PyList_GET_SIZE(recs) >= node->tensor_pre_hooks().size())
    return nullptr;
  *unseen = true;
  return "a tensor hook";
}

bool retain_recorded(Node* node) {
  PyObject* md = metadata_dict(node);
  return PyDict_Check(md) && PyDict_GetItemString(md, RETAINS_KEY);
}

// walk/fastwalk.py Note [Hook entries in C++].  names: (TENSOR_HOOKS_KEY, NodeHooks,
// hooks_and_signature, _ident, hook_dicts).
py::tuple hook_entries(CWalk& w, py::tuple names, bool tensor_hooks, py::object retained) {
  static PyObject* s_tensor = PyUnicode_InternFromString("tensor");
  static PyObject* s_retains = PyUnicode_InternFromString("retains");
  static PyObject* s_pre = PyUnicode_InternFromString("pre");
  static PyObject* s_post = PyUnicode_InternFromString("post");
  PyObject* key = names[0].ptr();
  py::object node_hooks_cls = names[1], general = names[2];
  PyObject* ident = names[3].ptr();
  py::object dicts = names[4];
  py::dict hooks;
  py::list entries;
  if (w.pynodes.size() != w.nodes.size()) w.pynodes.resize(w.nodes.size());
  const bool some_retained = !retained.is_none() && PyObject_IsTrue(retained.ptr());
  py::tuple empty;
  for (auto hi : w.hook_nodes) {
    const size_t i = hi.cast<size_t>();
    Node* node = w.nodes[i].get();
    auto& obj = w.pynodes.at(i);  // the Python node: made only where Python needs it
    bool slow = false;
    if (some_retained) {  // retains_grad: hooks.node_hooks
      if (!obj) obj = node_obj(w.nodes[i]);
      py::object id = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(obj.ptr()));
      int c = PyDict_Contains(retained.ptr(), id.ptr());
      if (c < 0) throw py::error_already_set();
      slow = c;
    }
    // Note [Hooks registered before compiled_bw] (_fastwalk.h): a retain_grad() compiled_bw's
    // own Tensor.retain_grad did not see (hooks.RETAINED has no tensor of this node)
    if (!slow && !node->retains_grad_hooks().empty() && !retain_recorded(node))
      raise(g_unsupported, hook_reason(node, "a retain_grad()", true));
    py::object tensor = py::none(), t_sig = empty;
    if (!slow && tensor_hooks && !node->tensor_pre_hooks().empty()) {
      // `node.metadata` (a hook dict is recorded there when the tensor hook is registered)
      py::object md = py::reinterpret_borrow<py::object>(metadata_dict(node));
      PyObject* recs = PyDict_Check(md.ptr()) ? PyDict_GetItemWithError(md.ptr(), key) : nullptr;
      if (!recs && PyErr_Occurred()) throw py::error_already_set();
      if (!PyDict_Check(md.ptr())) {
        slow = true;
      } else if (recs && PyObject_IsTrue(recs)) {
        PyObject* rec = PyList_CheckExact(recs) && PyList_GET_SIZE(recs) == 1
                            ? PyList_GET_ITEM(recs, 0)
                            : nullptr;
        if (!rec || !PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 2 ||
            !PyWeakref_Check(PyTuple_GET_ITEM(rec, 1))) {
          slow = true;  // several dicts on the node: hooks.node_hooks
        } else {
          PyObject* slot = PyTuple_GET_ITEM(rec, 0);
          PyObject* d = PyWeakref_GetObject(PyTuple_GET_ITEM(rec, 1));  // borrowed
          if (d != Py_None && !PyDict_Check(d)) {
            slow = true;
          } else if (d != Py_None && PyDict_Size(d) > 0) {
            py::dict t;
            py::list ds;
            ds.append(py::handle(d));
            t[py::handle(slot)] = ds;
            tensor = t;
            t_sig = py::make_tuple(py::make_tuple(py::handle(slot), idents_of(d, ident)));
          }
        }
      }
    }
    if (slow) {
      if (!obj) obj = node_obj(w.nodes[i]);
      py::object r = general(obj, retained, dicts);
      if (!r.is_none()) {
        hooks[hi] = r[py::int_(0)];
        entries.append(py::make_tuple(hi, r[py::int_(1)]));
      }
      continue;
    }
    py::object pre = py::none(), post = py::none(), pre_sig = py::none(), post_sig = py::none();
    auto [p, q] = hook_dicts_of(node);
    if (p && PyDict_Check(p) && PyDict_Size(p) > 0) {
      pre = py::reinterpret_borrow<py::object>(p);
      pre_sig = idents_of(p, ident);
    }
    if (q && PyDict_Check(q) && PyDict_Size(q) > 0) {
      post = py::reinterpret_borrow<py::object>(q);
      post_sig = idents_of(q, ident);
    }
    if (tensor.is_none() && pre.is_none() && post.is_none()) continue;
    // NodeHooks(tensor, pre, post) without its Python __init__ (~0.3 us): its four slots
    PyTypeObject* cls = (PyTypeObject*)node_hooks_cls.ptr();
    py::object h = py::reinterpret_steal<py::object>(cls->tp_alloc(cls, 0));
    if (!h) throw py::error_already_set();
    py::dict retains;
    if (PyObject_SetAttr(h.ptr(), s_tensor, tensor.is_none() ? py::dict().ptr() : tensor.ptr()) ||
        PyObject_SetAttr(h.ptr(), s_retains, retains.ptr()) ||
        PyObject_SetAttr(h.ptr(), s_pre, pre.ptr()) ||
        PyObject_SetAttr(h.ptr(), s_post, post.ptr()))
      throw py::error_already_set();
    hooks[hi] = h;
    entries.append(py::make_tuple(hi, py::make_tuple(t_sig, empty, pre_sig, post_sig)));
  }
  return py::make_tuple(hooks, entries);
}

}  // namespace compiled_bw::fastwalk
