// The Python module of the C++ walk (walk/fastwalk.py loads it as compiled_bw_fastwalk):
// bindings only.  Consumes the functions and types of _fastwalk_walk.cpp, _fastwalk_slots.cpp
// and _fastwalk_run.cpp (declared in _fastwalk.h); produces init, walk, CWalk, SlotList and the
// helpers the Python side and tests call (saved_hooks_in, run_leaf, accumulate_nodes, ...).
#include "_fastwalk.h"

#include <ATen/SavedTensorHooks.h>
#include <torch/csrc/autograd/functions/tensor.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

using torch::dynamo::autograd::AutogradCompilerCall;
using torch::dynamo::autograd::CompiledNodeArgs;
using torch::dynamo::autograd::NodeCall;
using torch::dynamo::autograd::SizeInput;
using namespace compiled_bw::fastwalk;

namespace {
// calls/unpacked.py Note [Unpack calls]: a SavedVariable carrying user hooks is swapped, while
// its node's formula is traced or run, for one whose unpack calls a Python function (which
// emits the graph's unpack call, or calls the original's unpack and notes what it returned).
struct ProbeHooks : SavedVariableHooks {
  PyObject* fn;  // owned
  explicit ProbeHooks(PyObject* f) : fn(f) { Py_INCREF(f); }
  ~ProbeHooks() override {
    py::gil_scoped_acquire g;
    Py_DECREF(fn);
  }
  void call_pack_hook(const at::Tensor&) override {}
  at::Tensor call_unpack_hook() override {
    py::gil_scoped_acquire g;
    THPObjectPtr r(PyObject_CallNoArgs(fn));
    if (!r) throw python_error();
    TORCH_CHECK_TYPE(THPVariable_Check(r.get()), "compiled_bw: an unpack probe returned ",
                     Py_TYPE(r.get())->tp_name);
    return THPVariable_Unpack(r.get());
  }
};
struct Swap {
  SavedVariable* where;
  SavedVariable orig;
};
std::unordered_map<int64_t, std::unique_ptr<Swap>> g_swaps;
int64_t g_next_swap = 0;
}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // The How enum (_fastwalk.h), name -> value: walk/fastwalk.py's _classify answers with it.
  py::dict how;
  how["trace"] = (int)H_TRACE;
  how["opaque"] = (int)H_OPAQUE;
  how["leaf"] = (int)H_LEAF;
  how["py"] = (int)H_PY;
  how["unsupported"] = (int)H_UNSUPPORTED;
  m.attr("HOW") = how;
  // CWalk.layout: one row of these per processed node (_fastwalk_walk.cpp walk): its index,
  // its class id, and where in the key its entry, its input metadata and the rest begin.
  m.attr("LAYOUT_FIELDS") = py::make_tuple("index", "class_id", "start", "meta", "rest");
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
  // Note [Unpack calls] (calls/unpacked.py): swap_saved(raw SavedTensor, fn) -> handle puts
  // a SavedVariable whose unpack calls fn() where the raw one was; unpack_swapped(handle, node)
  // runs the original's unpack (the user's hook, torch's checks); unswap_saved puts it back.
  m.def("swap_saved", [](py::object raw, py::object fn) {
    auto* sv = raw.cast<SavedVariable*>();
    auto s = std::make_unique<Swap>();
    s->where = sv;
    s->orig = std::move(*sv);
    auto tls = at::SavedTensorDefaultHooks::get_tls_state();  // no default hooks on ours
    at::SavedTensorDefaultHooks::set_tls_state(at::impl::SavedTensorDefaultHooksTLS());
    try {
      SavedVariable fresh(at::empty({0}), false);
      fresh.register_hooks(std::make_unique<ProbeHooks>(fn.ptr()));
      *sv = std::move(fresh);
    } catch (...) {
      at::SavedTensorDefaultHooks::set_tls_state(tls);
      *sv = std::move(s->orig);
      throw;
    }
    at::SavedTensorDefaultHooks::set_tls_state(tls);
    int64_t h = g_next_swap++;
    g_swaps[h] = std::move(s);
    return h;
  });
  m.def("unpack_swapped", [](int64_t h, py::object node) {
    Swap& s = *g_swaps.at(h);
    return s.orig.unpack(node_of(node.ptr()));
  });
  m.def("unswap_saved", [](int64_t h) {
    auto it = g_swaps.find(h);
    if (it == g_swaps.end()) return;
    *it->second->where = std::move(it->second->orig);
    g_swaps.erase(it);
  });
  m.def("node_streams", [](py::iterable nodes) {
    Streams s;
    for (auto n : nodes) add_streams(node_of(n.ptr()).get(), s);
    return stream_list(s);
  });
  m.def("node_address", [](py::object n) { return (size_t)node_of(n.ptr()).get(); });
  // calls/opaque.py Note [Opaque output layout]: the strides of a CopySlices node's base (its
  // grad for the base is `new_empty_strided(base sizes, base strides)`, tensor.cpp), or None
  // for another node.  Recognized by its mangled name, as the hooks below.
  m.def("copy_slices_base", [](py::object n) -> py::object {
    NodePtr held = node_of(n.ptr());
    Node* node = held.get();
    if (std::strcmp(typeid(*node).name(), "N5torch8autograd10CopySlicesE") != 0) {
      return py::none();
    }
    const at::TensorGeometry& base = static_cast<torch::autograd::CopySlices*>(node)->base;
    return py::make_tuple(py::cast(base.sizes().vec()), py::cast(base.strides().vec()));
  });
  // What eager's engine does after running a node with retain_graph=False: frees its saved
  // variables (and so their hooks and packed objects).
  m.def("release_node", [](py::object n) { node_of(n.ptr())->release_variables(); });
  // A node's Python pre- and post-hook dicts (None where it has none): the dicts torch hands
  // `Function._register_hook` when a hook is registered on the node (registerFunctionPreHook /
  // registerFunctionHook in python_cpp_function.cpp: the first PyFunctionPreHook /
  // PyFunctionPostHook's dict), read without registering anything (graph/hooks.py).  The
  // hooks' types are recognized by their mangled names: libtorch_python does not export their
  // typeinfo, so a dynamic_cast would not link.
  // Note [C++ hooks on interior nodes], for the Python walk: the fallback reason, or None.
  // retained: hooks.retained_by_node() or None (a retain_grad() it lacks was not seen)
  m.def(
      "foreign_hook",
      [](py::object n, py::object retained) -> py::object {
        Node* fn = node_of(n.ptr()).get();
        bool unseen = false;
        const char* what = foreign_hook(fn, &unseen);
        if (!what && !fn->retains_grad_hooks().empty() && !retain_recorded(fn)) {
          py::object id = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(n.ptr()));
          int c = retained.is_none() ? 0 : PyDict_Contains(retained.ptr(), id.ptr());
          if (c < 0) throw py::error_already_set();
          if (!c) what = "a retain_grad()", unseen = true;
        }
        if (!what) return py::none();
        return py::str(hook_reason(fn, what, unseen));
      },
      py::arg("n"), py::arg("retained") = py::none());
  m.def("hook_dicts", [](py::object n) {
    auto [pre, post] = hook_dicts_of(node_of(n.ptr()).get());
    return py::make_tuple(py::handle(pre ? pre : Py_None), py::handle(post ? post : Py_None));
  });
  // walk/fastwalk.py Note [Hook entries in C++]
  m.def("hook_entries", &hook_entries);
  // graph/saved.py Note [Version checks in C++]
  py::class_<VersionChecks, std::shared_ptr<VersionChecks>>(m, "VersionChecks")
      .def("check", &VersionChecks::check)
      .def("__bool__", [](VersionChecks& v) { return v.left > 0; });
  m.def("version_checks", &version_checks);
  // calls/opaque.py Note [Hook calls in C++]
  m.def("hooks_init", &hooks_init);
  m.def("tensor_hooks_call", &tensor_hooks_call);
  m.def("custom_init", &custom_init);
  m.def("custom_call", &custom_call);
  m.def("saved_variable_address", [](py::object sv) { return (size_t)sv.cast<SavedVariable*>(); });
  // compiled_args probe of one node, outside any walk: (ok, message).
  m.def("set_strip_backward", [](bool strip) { g_strip_backward = strip; });
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
  m.def("walk", &walk, py::arg("roots"), py::arg("kinds"), py::arg("history") = false);
  m.def("memo_init", &memo_init);
  m.def("memo_clear", &memo_clear);
  m.def("memo_stats", &memo_stats);
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
  m.def(
      "run_leaf",
      [](py::object node, py::object grad, bool steal) {
        NodePtr own = node_of(node.ptr());
        TORCH_CHECK(dynamic_cast<AccumulateGrad*>(own.get()),
                    "run_leaf: not an AccumulateGrad node");
        at::Tensor g = grad.is_none() ? at::Tensor() : THPVariable_Unpack(grad.ptr());
        if (steal && g.defined()) g = g.detach();
        try {
          py::gil_scoped_release no_gil;  // as the engine runs nodes: hooks take the GIL themselves
          run_leaf(own.get(), std::move(g));
        } catch (python_error& e) {  // a Python hook raised: re-raise that exception
          e.restore();
          throw py::error_already_set();
        }
      },
      py::arg("node"), py::arg("grad"), py::arg("steal") = false);
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
      .def_property_readonly("saved",
                             [](CWalk& w) {
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
      .def_property_readonly(
          "layout",
          [](CWalk& w) { return py::bytes((const char*)w.layout.data(), w.layout.size() * 4); })
      .def("__len__", [](CWalk& w) { return w.nodes.size(); })
      .def("node",
           [](CWalk& w, size_t i) {
             if (w.pynodes.size() != w.nodes.size()) w.pynodes.resize(w.nodes.size());
             auto& o = w.pynodes.at(i);
             if (!o) o = node_obj(w.nodes[i]);
             return o;
           })
      .def("nodes",
           [](CWalk& w) {
             if (w.pynodes.size() != w.nodes.size()) w.pynodes.resize(w.nodes.size());
             py::list out(w.nodes.size());
             for (size_t i = 0; i < w.nodes.size(); ++i) {
               if (!w.pynodes[i]) w.pynodes[i] = node_obj(w.nodes[i]);
               out[i] = w.pynodes[i];
             }
             return out;
           })
      .def("edges",
           [](CWalk& w) {
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
      .def("class_ids",
           [](CWalk& w) {
             py::list out(w.nodes.size());
             for (size_t i = 0; i < w.nodes.size(); ++i) out[i] = w.cls[i]->id;
             return out;
           })
      .def("opaque",
           [](CWalk& w) {
             py::list out(w.nodes.size());
             for (size_t i = 0; i < w.nodes.size(); ++i) out[i] = (int)w.opaque[i];
             return out;
           })
      .def("released",
           [](CWalk& w) {  // indices of nodes a retain_graph=False backward ran (freed)
             py::list out;
             for (size_t i = 0; i < w.nodes.size(); ++i)
               if (w.opaque[i] == 3) out.append(i);
             return out;
           })
      .def("hooked",
           [](CWalk& w) {  // indices of nodes whose saved tensors carry hooks not ours
             py::list out;
             for (size_t i = 0; i < w.nodes.size(); ++i)
               if (w.opaque[i] == 2) out.append(i);
             return out;
           })
      .def("saved_keys",
           [](CWalk& w) {  // (node index, attr, list position | -1) per saved
             py::list out(w.saved_src.size());
             for (size_t s = 0; s < w.saved_src.size(); ++s) {
               const SavedSrc& src = w.saved_src[s];
               if (!src.sv)
                 out[s] = w.py_keys[src.attr];
               else
                 out[s] = py::make_tuple(src.node, w.cls[src.node]->attrs[src.attr].name, src.pos);
             }
             return out;
           })
      // Eager's retain_graph=False: Node::release_variables() on each executed node (frees
      // its saved variables; a later unpack raises "backward through the graph a second time").
      .def("streams",
           [](CWalk& w) {
             Streams s;
             for (const auto& n : w.nodes) add_streams(n.get(), s);
             return stream_list(s);
           })
      .def("release_variables",
           [](CWalk& w, py::iterable executed) {
             for (auto e : executed) w.nodes.at(e.cast<size_t>())->release_variables();
           })
      .def("accumulate",
           [](CWalk& w, py::list leaf_idx, py::list grads) {
             std::vector<Node*> raw;
             for (auto e : leaf_idx) raw.push_back(w.nodes.at(e.cast<size_t>()).get());
             return accumulate(raw, grads);
           })
      .def("run_native", &run_native, py::arg("entry"), py::arg("roots"), py::arg("n_inputs"),
           py::arg("leaf_idx"), py::arg("leaf_pos"), py::arg("accumulate"),
           py::arg("tail") = py::list())
      // storage offsets of the saved tensors at these positions (C++ or Python ones)
      .def("saved_offsets",
           [](CWalk& w, py::sequence pos) {
             py::list out;
             for (auto p : pos) {
               size_t s = p.cast<size_t>();
               if (w.saved_in_py) {
                 out.append(py::int_(THPVariable_Unpack(w.saved[s].ptr()).storage_offset()));
               } else {
                 out.append(py::int_(w.saved_t.at(s).storage_offset()));
               }
             }
             return out;
           })
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
