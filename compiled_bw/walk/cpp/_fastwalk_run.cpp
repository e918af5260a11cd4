// What the C++ walk runs: leaf grads delivered directly to AccumulateGrad, AccumulateGrad nodes
// run as the engine runs them (delivery points), the C++ hit path (run_native), and the streams
// the forward ran the nodes' ops on, the saved-tensor version checks after user code and the
// one-grad tensor hook call of an opaque call (declarations in _fastwalk.h).  Consumes a CWalk or
// autograd nodes, grads and a compiled graph's entry (or a running step); produces accumulated
// .grads, grad()'s results, or a hook call's outputs.
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include "_fastwalk.h"

#include <torch/csrc/inductor/aoti_torch/tensor_converter.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

namespace compiled_bw::fastwalk {

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
  TORCH_CHECK(nodes.size() == (size_t)py::len(grads),
              "accumulate: nodes and grads differ in length");
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
// [Box ownership]), then `tail` (a dynamic graph's SymInt inputs, as the 0-dim int64 tensors
// the C++ wrapper reads them from).  backward() (accumulate): leaf k gets output leaf_pos[k] (None:
// no grad) through its AccumulateGrad (accumulate_one); returns True.  grad(): leaf_idx is empty
// and the result is the list of outputs at leaf_pos (None stays None), as Python tensors.
// Returns False, touching nothing, when the saved tensors are already in Python or some
// leaf's AccumulateGrad is not plain_accumulator.
py::object run_native(CWalk& w, py::handle entry, py::list roots, size_t n_inputs,
                      py::sequence leaf_idx_seq, py::sequence leaf_pos_seq, bool accumulate,
                      py::list tail) {
  using torch::aot_inductor::new_tensor_handle;
  if (w.saved_in_py) return py::bool_(false);
  auto leaf_idx = py::reinterpret_steal<py::object>(PySequence_Fast(leaf_idx_seq.ptr(), "leaves"));
  auto leaf_pos =
      py::reinterpret_steal<py::object>(PySequence_Fast(leaf_pos_seq.ptr(), "positions"));
  if (!leaf_idx || !leaf_pos) throw py::error_already_set();
  const size_t n_leaves = PySequence_Fast_GET_SIZE(leaf_pos.ptr());
  TORCH_CHECK((size_t)PySequence_Fast_GET_SIZE(leaf_idx.ptr()) == (accumulate ? n_leaves : 0),
              "run_native: leaves and positions differ in length");
  std::vector<Node*> nodes(accumulate ? n_leaves : 0);
  for (size_t k = 0; k < nodes.size(); ++k)
    nodes[k] = w.nodes.at(PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(leaf_idx.ptr(), k))).get();
  if (!all_plain_accumulators(nodes)) return py::bool_(false);
  const size_t n_roots = py::len(roots);
  const size_t n_tail = py::len(tail);
  TORCH_CHECK(n_roots + w.saved_t.size() + n_tail == n_inputs,
              "run_native: the compiled graph takes ", n_inputs, " inputs, this step has ",
              n_roots + w.saved_t.size() + n_tail);
  py::list handles(n_inputs);
  for (size_t r = 0; r < n_roots; ++r) {
    at::Tensor t = THPVariable_Unpack(PyList_GET_ITEM(roots.ptr(), r));
    PyList_SET_ITEM(handles.ptr(), r,
                    PyCapsule_New(new_tensor_handle(std::move(t)), nullptr, nullptr));
  }
  for (size_t s = 0; s < w.saved_t.size(); ++s)
    PyList_SET_ITEM(handles.ptr(), n_roots + s,
                    PyCapsule_New(new_tensor_handle(std::move(w.saved_t[s])), nullptr, nullptr));
  const size_t n_box = n_roots + w.saved_t.size();
  w.saved_t.clear();
  w.saved_in_py = true;  // none left: a later `saved` is an empty list
  for (size_t r = 0; r < n_tail; ++r) {
    at::Tensor t = THPVariable_Unpack(PyList_GET_ITEM(tail.ptr(), r));
    PyList_SET_ITEM(handles.ptr(), n_box + r,
                    PyCapsule_New(new_tensor_handle(std::move(t)), nullptr, nullptr));
  }
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
  std::vector<at::Tensor> outs = torch::aot_inductor::alloc_tensors_by_stealing_from_handles(
      out_handles.data(), out_handles.size());
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
void add_streams(Node* n, Streams& out) {
  for (uint32_t i = 0; i < n->num_inputs(); ++i) {
    const auto& m = n->input_metadata(i);
    if (m.device().is_cpu() || m.device().is_meta()) continue;
    auto st = m.stream();
    out.emplace(c10::DeviceTypeName(st.device_type(), /*lower_case=*/true), (int)st.device_index(),
                (int64_t)st.id());
  }
}

py::list stream_list(const Streams& s) {
  py::list out;
  for (const auto& [t, i, id] : s) out.append(py::make_tuple(t, i, id));
  return out;
}

}  // namespace compiled_bw::fastwalk

namespace compiled_bw::fastwalk {

// graph/saved.py Note [Version checks in C++].
py::object VersionChecks::check(size_t site) {
  if (site >= sites.size() || sites[site].empty()) return py::none();
  auto list = std::move(sites[site]);
  sites[site].clear();
  --left;
  for (size_t j = 0; j < list.size(); ++j) {
    const at::Tensor& t = list[j].first;
    if (t._version() != list[j].second) {
      PyObject* o = THPVariable_Wrap(t);
      if (!o) throw py::error_already_set();
      py::object reader = py::reinterpret_borrow<py::tuple>(readers[site])[j][py::int_(1)];
      return py::make_tuple(py::reinterpret_steal<py::object>(o), list[j].second, reader);
    }
  }
  return py::none();
}

std::shared_ptr<VersionChecks> version_checks(py::list box, size_t off, py::tuple spec) {
  auto vc = std::make_shared<VersionChecks>();
  if (spec.size()) {  // (sorted by site: the last is the largest)
    const size_t n = spec[spec.size() - 1].cast<py::tuple>()[0].cast<size_t>() + 1;
    vc->sites.resize(n);
    vc->readers.resize(n);
  }
  for (auto item : spec) {
    auto pair = item.cast<py::tuple>();
    const size_t site = pair[0].cast<size_t>();
    auto ks = pair[1].cast<py::tuple>();
    if (vc->sites.size() <= site) {
      vc->sites.resize(site + 1);
      vc->readers.resize(site + 1);
    }
    auto& list = vc->sites[site];
    if (!list.empty()) raise(PyExc_AssertionError, "version_checks: a site listed twice");
    if (ks.size()) ++vc->left;
    vc->readers[site] = ks;
    for (auto kr : ks) {
      const size_t k = off + PyLong_AsSize_t(PyTuple_GET_ITEM(kr.ptr(), 0));
      if (PyErr_Occurred()) throw py::error_already_set();
      at::Tensor t = THPVariable_Unpack(box[k].ptr());
      const int64_t v = t._version();
      list.emplace_back(std::move(t), v);
    }
  }
  return vc;
}

}  // namespace compiled_bw::fastwalk

namespace compiled_bw::fastwalk {

namespace {
// calls/opaque.py's Python halves of a hook call (hooks_init sets them)
py::object& g_after_user_code = *new py::object();  // _after_user_code(step, s, site)
py::object& g_outputs = *new py::object();          // _outputs(step, s, site, outs, grads, label)
py::object& g_check_single = *new py::object();     // hooks.check_single(old, new, hook)
py::object& g_raise_modified = *new py::object();   // saved.raise_modified(t, version, reader)
// Note [Custom calls in C++] (custom_init sets them): opaque._custom_tail(step, s, site, node,
// r, grads, label, n_hooks), hooks.COUNTS, custom.FWD_KEY
py::object& g_custom_tail = *new py::object();
py::object& g_counts = *new py::object();
py::object& g_fwd_key = *new py::object();

PyObject* interned(const char* s) { return PyUnicode_InternFromString(s); }

py::object attr(PyObject* o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o, name);
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

// Puts step.current back however the hooks end (a hook that raises included).
struct CurrentGuard {
  PyObject* step;
  py::object prev;
  ~CurrentGuard() {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    static PyObject* s_current = interned("current");
    if (PyObject_SetAttr(step, s_current, prev.ptr())) PyErr_Clear();
    PyErr_Restore(t, v, tb);
  }
};

bool same_strides(const at::Tensor& t, PyObject* want) {
  if (!PyTuple_Check(want)) return false;
  auto st = t.strides();
  if ((size_t)PyTuple_GET_SIZE(want) != st.size()) return false;
  for (size_t d = 0; d < st.size(); ++d) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(want, d));
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (v != st[d]) return false;
  }
  return true;
}
}  // namespace

void custom_init(py::object custom_tail, py::object counts, py::object fwd_key) {
  g_custom_tail = custom_tail;
  g_counts = counts;
  g_fwd_key = fwd_key;
}

void hooks_init(py::object after_user_code, py::object outputs, py::object check_single,
                py::object raise_modified) {
  g_after_user_code = after_user_code;
  g_outputs = outputs;
  g_check_single = check_single;
  g_raise_modified = raise_modified;
}

// The end of a call whose user code returned one grad `g` (tensor hooks, custom Functions):
// the checks once user code returned (opaque.py _after_user_code), then `g` itself when it is
// the grad given, in the promised layout, else opaque.py's `_outputs`.
// Holds no reference to `g` when `_outputs` runs: what user code returned is then referenced
// as on the Python path (opaque.py _outputs counts references to decide stealing).
py::object after_user_code(py::handle step, py::handle s, py::handle site, py::object&& g,
                           py::list grads, py::handle label, bool pass_on = true) {
  static PyObject* s_hooks_changed = interned("hooks_changed");
  static PyObject* s_checks = interned("checks");
  static PyObject* s_out_strides = interned("out_strides");
  py::object changed = attr(step.ptr(), s_hooks_changed);
  int hc = PyObject_IsTrue(changed.ptr());
  if (hc < 0) throw py::error_already_set();
  py::object checks = attr(step.ptr(), s_checks);
  if (hc) {
    g_after_user_code(step, s, site);
  } else if (!checks.is_none()) {
    if (py::isinstance<VersionChecks>(checks)) {
      py::object bad = checks.cast<VersionChecks*>()->check(site.cast<size_t>());
      if (!bad.is_none()) g_raise_modified(*bad);
    } else if (PyObject_IsTrue(checks.ptr())) {
      g_after_user_code(step, s, site);
    }
  }
  PyObject* g0 = PyList_GET_ITEM(grads.ptr(), 0);
  bool passed = false;
  if (pass_on && g.ptr() == g0 && PyList_GET_SIZE(grads.ptr()) == 1) {
    py::object strides = attr(s.ptr(), s_out_strides);
    passed = PyTuple_Check(strides.ptr()) && PyTuple_GET_SIZE(strides.ptr()) > 0 &&
             same_strides(THPVariable_Unpack(g0), PyTuple_GET_ITEM(strides.ptr(), 0));
  }
  py::list outs(1);
  PyList_SET_ITEM(outs.ptr(), 0, g.release().ptr());  // (steals)
  if (passed) return std::move(outs);
  return g_outputs(step, s, site, outs, grads, label);
}

// calls/opaque.py Note [One-grad tensor hook calls], in C++ (Note [Hook calls in C++]).
py::object tensor_hooks_call(py::handle step, py::handle s, py::handle site, py::handle h,
                             py::list grads, py::handle label) {
  static PyObject* s_current = interned("current");
  static PyObject* s_node_index = interned("node_index");
  static PyObject* s_tensor = interned("tensor");
  static PyObject* s_values = interned("values");
  static PyObject* s_zero = PyLong_FromLong(0);
  PyObject* g0 = PyList_GET_ITEM(grads.ptr(), 0);
  py::object g = py::reinterpret_borrow<py::object>(g0);
  py::object tensor = attr(h.ptr(), s_tensor);
  PyObject* dicts =
      PyDict_Check(tensor.ptr()) ? PyDict_GetItemWithError(tensor.ptr(), s_zero) : nullptr;
  if (!dicts && PyErr_Occurred()) throw py::error_already_set();
  {
    CurrentGuard guard{step.ptr(), attr(step.ptr(), s_current)};
    if (PyObject_SetAttr(step.ptr(), s_current, attr(s.ptr(), s_node_index).ptr()))
      throw py::error_already_set();
    if (dicts) {
      py::object ds = py::reinterpret_borrow<py::object>(dicts);  // (a hook may change h)
      py::object it = py::reinterpret_steal<py::object>(PyObject_GetIter(ds.ptr()));
      if (!it) throw py::error_already_set();
      while (PyObject* d_ = PyIter_Next(it.ptr())) {
        py::object d = py::reinterpret_steal<py::object>(d_);
        // a snapshot (hooks may remove themselves), in the dict's own order (eager's
        // PyDict_Next); not a dict: the Python call's `list(d.values())`
        py::object hs = py::reinterpret_steal<py::object>(
            PyDict_Check(d.ptr()) ? PyDict_Values(d.ptr())
                                  : PySequence_List(attr(d.ptr(), s_values)().ptr()));
        if (!hs) throw py::error_already_set();
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(hs.ptr()); ++k) {
          PyObject* hook = PyList_GET_ITEM(hs.ptr(), k);
          PyObject* r = PyObject_CallOneArg(hook, g.ptr());
          if (!r) throw py::error_already_set();
          py::object res = py::reinterpret_steal<py::object>(r);
          if (r == Py_None || r == g.ptr()) continue;
          // hooks.py Note [Cheap result checks]: a plain tensor of the same type and size
          // passes; anything else goes through check_single (eager's errors)
          if (Py_TYPE(r) == (PyTypeObject*)THPVariableClass && THPVariable_Check(g.ptr())) {
            const at::Tensor& o = THPVariable_Unpack(g.ptr());
            const at::Tensor& n = THPVariable_Unpack(r);
            if (o.defined() && n.defined() && n.scalar_type() == o.scalar_type() &&
                n.layout() == o.layout() && n.device() == o.device() &&
                n.sizes().equals(o.sizes())) {
              g = std::move(res);
              continue;
            }
          }
          g = g_check_single(g, res, py::handle(hook));
        }
      }
      if (PyErr_Occurred()) throw py::error_already_set();
    }
  }
  return after_user_code(step, s, site, py::object(g), grads, label);  // (g stays referenced)
}

// calls/opaque.py Note [Custom calls in C++]: an opaque custom Function's call; None when it
// is not for this path (a grad is None: PyNode's materializing is Python's), before any user
// code ran.
py::object custom_call(py::handle step, py::handle s, py::handle site, py::list grads,
                       py::handle label) {
  static PyObject* s_current = interned("current");
  static PyObject* s_node_index = interned("node_index");
  static PyObject* s_nodes = interned("nodes");
  static PyObject* s_apply = interned("apply");
  static PyObject* s_metadata = interned("metadata");
  static PyObject* s_is_var = interned("is_var");
  static PyObject* s_out_meta = interned("out_meta");
  static PyObject* s_node = interned("node");
  static PyObject* s_free_inputs = interned("free_inputs");
  const Py_ssize_t n = PyList_GET_SIZE(grads.ptr());
  for (Py_ssize_t k = 0; k < n; ++k)
    if (!THPVariable_Check(PyList_GET_ITEM(grads.ptr(), k))) return py::none();
  py::object index = attr(s.ptr(), s_node_index);
  py::object node = py::reinterpret_steal<py::object>(
      PyObject_GetItem(attr(step.ptr(), s_nodes).ptr(), index.ptr()));
  if (!node) throw py::error_already_set();
  py::object n_hooks = attr(g_counts.ptr(), s_node);
  py::object r;
  {
    CurrentGuard guard{step.ptr(), attr(step.ptr(), s_current)};
    if (PyObject_SetAttr(step.ptr(), s_current, index.ptr())) throw py::error_already_set();
    // PyNode::apply: the node's `apply` called with the grads (python_function.cpp)
    py::object args = py::reinterpret_steal<py::object>(PyList_AsTuple(grads.ptr()));
    if (!args) throw py::error_already_set();
    PyObject* got = PyObject_Call(attr(node.ptr(), s_apply).ptr(), args.ptr(), nullptr);
    if (!got) throw py::error_already_set();
    r = py::reinterpret_steal<py::object>(got);
  }
  // the common case needs none of custom.finish's, validate_metas' or _late_post_hooks' work:
  // one plain tensor returned for one forward input that is a tensor, of the shape, dtype
  // and device its edge's slot expects (a 3-part metadata: no leaf grad_dtype), and no node
  // hook registered while it ran; anything else is opaque.py's `_custom_tail`
  bool plain = Py_TYPE(r.ptr()) == (PyTypeObject*)THPVariableClass;
  if (plain) {
    py::object meta = attr(node.ptr(), s_metadata);
    PyObject* info =
        PyDict_Check(meta.ptr()) ? PyDict_GetItemWithError(meta.ptr(), g_fwd_key.ptr()) : nullptr;
    if (!info && PyErr_Occurred()) throw py::error_already_set();
    plain = info != nullptr;
    if (plain) {
      py::object is_var = attr(info, s_is_var);
      plain = PyTuple_Check(is_var.ptr()) && PyTuple_GET_SIZE(is_var.ptr()) == 1 &&
              PyTuple_GET_ITEM(is_var.ptr(), 0) == Py_True;
    }
  }
  if (plain) {
    py::object metas = attr(s.ptr(), s_out_meta);
    plain = PyTuple_Check(metas.ptr()) && PyTuple_GET_SIZE(metas.ptr()) == 1;
    PyObject* m = plain ? PyTuple_GET_ITEM(metas.ptr(), 0) : nullptr;
    plain = plain && PyTuple_Check(m) && PyTuple_GET_SIZE(m) == 3;
    if (plain) {
      const at::Tensor& t = THPVariable_Unpack(r.ptr());
      PyObject* shape = PyTuple_GET_ITEM(m, 0);
      PyObject* dtype = PyTuple_GET_ITEM(m, 1);
      PyObject* device = PyTuple_GET_ITEM(m, 2);
      plain = t.defined() && PyTuple_Check(shape) && THPDtype_Check(dtype) &&
              THPDevice_Check(device) && t.scalar_type() == ((THPDtype*)dtype)->scalar_type &&
              t.device() == ((THPDevice*)device)->device &&
              (size_t)PyTuple_GET_SIZE(shape) == (size_t)t.dim();
      for (int64_t d = 0; plain && d < t.dim(); ++d) {
        PyObject* v = PyTuple_GET_ITEM(shape, d);
        plain = PyLong_CheckExact(v) && PyLong_AsLongLong(v) == t.sizes()[d];
      }
      if (PyErr_Occurred()) throw py::error_already_set();
    }
  }
  if (plain) {
    py::object now = attr(g_counts.ptr(), s_node);
    int same = PyObject_RichCompareBool(now.ptr(), n_hooks.ptr(), Py_EQ);
    if (same < 0) throw py::error_already_set();
    plain = same;
  }
  if (!plain) {  // (the box is the only holder of `r`: opaque.py _custom_tail takes it out)
    py::list box(1);
    PyList_SET_ITEM(box.ptr(), 0, r.release().ptr());
    return g_custom_tail(step, s, site, node, box, grads, label, n_hooks);
  }
  // a grad passed through goes on as is unless the call's outputs may be stolen at a
  // delivery point (opaque.py Note [One grad for several leaves]: `free_inputs`)
  py::object free = attr(s.ptr(), s_free_inputs);
  int may_steal = PyObject_IsTrue(free.ptr());
  if (may_steal < 0) throw py::error_already_set();
  return after_user_code(step, s, site, std::move(r), grads, label, !may_steal);
}

}  // namespace compiled_bw::fastwalk
