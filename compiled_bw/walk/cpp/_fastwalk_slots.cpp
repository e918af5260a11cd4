// The slots of the C++ walk: hooks on SavedVariables that hold the saved tensors while a step is
// traced (Note [Slots] in saved.py), and SlotList, the slots of one step (declarations in
// _fastwalk.h).  Consumes a CWalk (its saved tensors' sources and key ranges) and the Python
// Slots of the Python-read saved tensors; produces the installed slots, which placeholders
// stand in for while tracing and which release their tensors as eager's engine would.
#include "_fastwalk.h"

namespace compiled_bw::fastwalk {

// Our hooks answer retrieve_unpack_hook_data with (g_marker, address of their SlotState): how
// the walk recognizes its own slots on a SavedVariable walked again (retain_graph=True).
PyObject* g_marker = nullptr;

namespace {

// Eager's names in SavedVariable::unpack's error (torch 2.13): the legacy Python type name for
// the legacy scalar types (torch.FloatTensor, torch.cuda.LongTensor), else Tensor::toString
// (CPUBoolType, CPUBFloat16Type); saved.py modified_message says the same.
std::string type_str(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kHalf:
    case at::kFloat:
    case at::kDouble: {
      std::string s = "torch.";
      if (t.device().type() != c10::DeviceType::CPU)
        s += c10::DeviceTypeName(t.device().type(), true) + ".";
      return s + c10::toString(t.scalar_type()) + "Tensor";
    }
    default:
      return t.toString();
  }
}

}  // namespace

// Whether eager's unpack error names a grad_fn without its "Backward<N>" suffix (torch 2.13:
// "of Mul,") or whole (torch 2.11: "of MulBackward0,"); set from
// torchapi.autograd.unpack_error_strips_backward() by walk/fastwalk.py.
bool g_strip_backward = true;

namespace {

// ", which is output N of Mul,": the grad_fn `fn` named without its "Backward<N>" suffix on
// releases that strip it.
std::string which_text(std::string name, uint32_t nr) {
  auto at = name.rfind("Backward");
  if (g_strip_backward && at != std::string::npos &&
      name.find_first_not_of("0123456789", at + 8) == std::string::npos)
    name.resize(at);
  return ", which is output " + std::to_string(nr) + " of " + name + ",";
}

// What eager names for slot `s` holding `t` (Note [What eager's unpack error names]).
std::string which_output(const SlotState& s, const at::Tensor& t) {
  if (!s.named) {
    const auto& fn = t.grad_fn();
    return fn ? which_text(fn->name(), t.output_nr()) : "";
  }
  if (s.orig.defined()) {  // a saved original: its grad_fn now, output_nr_ never recorded
    const auto& fn = s.orig.grad_fn();
    return which_text(fn ? fn->name() : s.fn_name, 0);
  }
  return s.fn_name.empty() ? "" : which_text(s.fn_name, s.out_nr);
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

}  // namespace

at::Tensor slot_unpack(const SlotState& s) {
  if (s.placeholder.defined()) return s.placeholder;
  TORCH_CHECK(!s.released, torch::autograd::ERR_BACKWARD_TWICE);
  const at::Tensor& t = s.value;
  if (t._version() != s.version) {
    // Note [No iostreams in the walk]: the message is built without std::ostream
    std::string sizes = "[";
    for (size_t i = 0; i < t.sizes().size(); ++i)
      sizes += (i ? ", " : "") + std::to_string(t.sizes()[i]);
    sizes += "]";
    TORCH_CHECK(false,
                "one of the variables needed for gradient computation has been modified by an "
                "inplace operation: [" +
                    type_str(t) + " " + sizes + "]" + which_output(s, t) + " is at version " +
                    std::to_string(t._version()) + "; expected version " +
                    std::to_string(s.version) +
                    " instead. Hint: enable anomaly detection to find the operation that failed "
                    "to compute its gradient, with "
                    "torch.autograd.set_detect_anomaly(True, check_nan=False).");
  }
  return t;
}

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

// ---- SlotList: the slots of one step, parallel to saved + slot_only ------------------------

void SlotList::set_placeholders(py::sequence phs) {
  TORCH_CHECK((size_t)py::len(phs) == n_saved, "placeholders: wrong count");
  for (size_t s = 0; s < n_saved; ++s) {
    if (c[s])
      c[s]->placeholder = THPVariable_Unpack(phs[s].ptr());
    else
      p[s].attr("placeholder") = phs[s];
  }
}

void SlotList::clear_placeholders() {
  for (size_t s = 0; s < c.size(); ++s) {
    if (c[s])
      c[s]->placeholder = at::Tensor();
    else
      p[s].attr("placeholder") = py::none();
  }
}

void SlotList::release_one(size_t s) {  // drops saved tensor s; a later unpack raises eager's error
  if (c.at(s)) {
    c[s]->value = at::Tensor();
    c[s]->orig = at::Tensor();
    c[s]->released = true;
  } else {
    p.at(s).attr("release")();
  }
}

void SlotList::release(py::iterable executed, size_t n_nodes) {
  std::vector<uint8_t> mask(n_nodes, 0);
  for (auto e : executed) mask.at(e.cast<size_t>()) = 1;
  for (size_t s = 0; s < c.size(); ++s)
    if (mask.at(node[s])) release_one(s);
}

namespace {

// Records in st what eager's unpack error would name for sv, saved for `owner`, before our
// hooks replace its data (Note [What eager's unpack error names] in saved.py).  Two unpacks:
// a saved original comes back as eager's own tensor both times, anything else as a new tensor
// carrying the grad_fn and output number eager names.
void note_eager_names(SlotState& st, const SavedVariable& sv, const NodePtr& owner) {
  at::Tensor a, b;
  try {
    a = sv.unpack(owner);
    b = sv.unpack(owner);
  } catch (const c10::Error&) {
    return;
  }
  if (!a.defined()) return;
  st.named = true;
  if (a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl()) {
    if (a.is_leaf()) return;  // nothing named
    st.orig = std::move(a);
    st.fn_name = owner->name();  // what eager names if it loses its grad_fn (.detach_())
    return;
  }
  const auto& fn = a.grad_fn();
  st.fn_name = fn ? fn->name() : owner->name();
  st.out_nr = a.output_nr();
}

}  // namespace

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
      note_eager_names(*st, *s.sv, w.nodes.at(s.node));
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

}  // namespace compiled_bw::fastwalk
