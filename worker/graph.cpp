/*
 * graph.cpp - an uploaded module's stages found in its forward graph
 * (graph.h), without running any of it.
 *
 * The forward's graph is copied; calls to the module's own helper methods
 * and to functions are inlined, and a submodule's forward is inlined when
 * its own graph has a place where one tensor alone crosses (a Sequential,
 * a ModuleList walked in a loop), one level at a time.  The top-level
 * nodes that compute (not the attribute reads and constants, which any
 * stage can repeat) are laid out in order; between two of them the live
 * set is every value made before and read after.  A cut is kept where
 * that set is one tensor that the next stage does not write in place.
 * Each stage's nodes are cloned into a graph of their own with the
 * attribute reads and constants they need, taking (self, x).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/core/class_type.h>
#include <ATen/core/function_schema.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "graph.h"
#include "shim_private.h"

namespace rw
{

namespace
{

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

/* More top-level nodes than this after inlining: no further inlining (a
 * graph this long is cut finely enough, and the liveness is quadratic). */
constexpr size_t MAX_NODES = 20000;

torch::jit::GraphFunction *callee(Node *n)
{
    torch::jit::Function *f = nullptr;
    if (n->kind() == c10::prim::CallMethod) {
        auto cls = n->inputs().empty() ? nullptr : n->input(0)->type()->cast<c10::ClassType>();
        f = cls ? cls->findMethod(n->s(c10::attr::name)) : nullptr;
    } else if (n->kind() == c10::prim::CallFunction) {
        auto ft = n->inputs().empty() ? nullptr : n->input(0)->type()->cast<c10::FunctionType>();
        f = ft ? ft->function() : nullptr;
    }
    torch::jit::GraphFunction *gf = f ? torch::jit::tryToGraphFunction(*f) : nullptr;
    if (gf != nullptr)
        gf->ensure_defined();
    return gf;
}

/* A call of a module's forward: "forward", or for a module a trace saw
 * called twice, "forward1", "forward2" ... (one method per call). */
bool is_forward_call(Node *n)
{
    if (n->kind() != c10::prim::CallMethod)
        return false;
    const std::string &name = n->s(c10::attr::name);
    if (name.compare(0, 7, "forward") != 0)
        return false;
    for (size_t i = 7; i < name.size(); i++)
        if (!isdigit((unsigned char)name[i]))
            return false;
    return true;
}

/* Whether the module a call runs has submodules: a container or a block,
 * which may be inlined; a leaf (a convolution, a norm) stays one call. */
bool has_submodules(Node *call)
{
    auto cls = call->input(0)->type()->cast<c10::ClassType>();
    if (!cls)
        return false;
    for (size_t i = 0; i < cls->numAttributes(); i++) {
        auto t = cls->getAttribute(i)->cast<c10::ClassType>();
        if (t && t->is_module())
            return true;
    }
    return false;
}

/* A value any stage can make again from self alone: self, a constant, an
 * attribute read from such a value, a list or tuple of them. */
class Free
{
  public:
    explicit Free(Value *self) : self_(self)
    {
    }
    bool operator()(Value *v)
    {
        auto it = memo_.find(v);
        if (it != memo_.end())
            return it->second;
        bool r = false;
        Node *n = v->node();
        if (v == self_ || n->kind() == c10::prim::Constant)
            r = true;
        else if (n->kind() == c10::prim::GetAttr || n->kind() == c10::prim::ListConstruct ||
                 n->kind() == c10::prim::TupleConstruct) {
            r = n->owningBlock() == self_->owningGraph()->block();
            for (Value *in : n->inputs())
                r = r && (*this)(in);
        }
        memo_[v] = r;
        return r;
    }

  private:
    Value *self_;
    std::unordered_map<Value *, bool> memo_;
};

/* The booleans a function's inputs are known to hold: the constants its
 * caller passed (F.relu's inplace, a ReLU module's constant). */
using Known = std::unordered_map<Value *, bool>;

/* What a condition is known to be, from a constant or known. */
c10::optional<bool> known_bool(Value *v, const Known &known)
{
    if (v->type()->kind() != c10::TypeKind::BoolType)
        return c10::nullopt;
    auto it = known.find(v);
    if (it != known.end())
        return it->second;
    return torch::jit::constant_as<bool>(v);
}

/* Whether node n can run: every If around it whose condition is known
 * takes the branch n is in (F.relu's relu_ runs only when inplace). */
bool reached(Node *n, const Known &known)
{
    for (torch::jit::Block *b = n->owningBlock(); b->owningNode() != nullptr;
         b = b->owningNode()->owningBlock()) {
        Node *o = b->owningNode();
        if (o->kind() != c10::prim::If)
            continue;
        c10::optional<bool> cond = known_bool(o->input(0), known);
        if (cond && (o->blocks()[0] == b) != *cond)
            return false;
    }
    return true;
}

/* Whether the use of a value writes it in place, through views of it and
 * into the functions and methods it is passed to, skipping the branches
 * a known condition does not take (depth bounds the walk; deeper is taken
 * as a write, as is a loop-carried value). */
bool writes(const torch::jit::Use &u, int depth, const Known &known);

bool writes_any(Value *v, int depth, const Known &known)
{
    for (const torch::jit::Use &u : v->uses())
        if (reached(u.user, known) && writes(u, depth, known))
            return true;
    return false;
}

bool writes(const torch::jit::Use &u, int depth, const Known &known)
{
    if (depth > 32)
        return true;
    Node *n = u.user;
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction) {
        torch::jit::GraphFunction *gf = callee(n);
        if (gf == nullptr)
            return true;
        /* A method's input 0 is its self; a function's is the function. */
        if (u.offset == 0)
            return false;
        size_t skip = n->kind() == c10::prim::CallMethod ? 0 : 1;
        auto g = gf->graph();
        size_t k = u.offset - skip;
        if (k >= g->inputs().size())
            return true;
        Known inner;
        for (size_t i = skip; i < n->inputs().size() && i - skip < g->inputs().size(); i++)
            if (c10::optional<bool> b = known_bool(n->input(i), known))
                inner[g->inputs()[i - skip]] = *b;
        return writes_any(g->inputs()[k], depth + 1, inner);
    }
    if (n->kind() == c10::prim::Loop)
        return true;
    const c10::FunctionSchema *s = n->maybeSchema();
    if (s == nullptr || u.offset >= s->arguments().size())
        return false;
    const c10::AliasInfo *a = s->arguments()[u.offset].alias_info();
    if (a == nullptr)
        return false;
    if (a->isWrite())
        return true;
    /* A view: what writes the view writes the value. */
    for (size_t j = 0; j < n->outputs().size() && j < s->returns().size(); j++)
        if (s->returns()[j].alias_info() != nullptr && writes_any(n->output(j), depth + 1, known))
            return true;
    return false;
}

/* The top-level nodes that compute, in order, and for each position
 * between them (0 before the first, nodes.size() before the return) the
 * one tensor crossing it, or nullptr where more than one value (or one
 * that is not a tensor, or one the next stage writes) crosses. */
struct Cuts {
    std::vector<Node *> nodes;
    std::vector<Value *> cross;
    std::vector<bool> single; /* one tensor crosses, written after or not */
};

Cuts find_cuts(Graph &g)
{
    Cuts c;
    Value *self = g.inputs()[0];
    Free free(self);
    std::unordered_map<Node *, size_t> at;
    for (Node *n : g.nodes()) {
        bool all_free = n->blocks().empty() && !n->outputs().empty();
        for (Value *o : n->outputs())
            all_free = all_free && free(o);
        if (all_free)
            continue;
        at[n] = c.nodes.size();
        c.nodes.push_back(n);
    }
    size_t N = c.nodes.size();
    /* The top-level index of a use (a node in a nested block counts as its
     * outermost owner; the return as N). */
    auto index_of = [&](Node *n) -> size_t {
        while (n->owningBlock() != g.block())
            n = n->owningBlock()->owningNode();
        if (n == g.return_node())
            return N;
        auto it = at.find(n);
        return it == at.end() ? 0 : it->second;
    };
    std::vector<std::vector<std::pair<Value *, size_t>>> live_from(N + 1);
    std::vector<int> count(N + 2, 0);
    /* A value made by node def is live at cuts def+1 .. its last use. */
    auto add = [&](Value *v, size_t def) {
        size_t last = 0;
        bool used = false;
        for (const torch::jit::Use &u : v->uses()) {
            last = std::max(last, index_of(u.user));
            used = true;
        }
        if (!used || last < def + 1)
            return;
        count[def + 1]++;
        count[last + 1]--;
        live_from[def + 1].emplace_back(v, last);
    };
    for (size_t i = 1; i < g.inputs().size(); i++) {
        Value *v = g.inputs()[i];
        /* A graph input is live from cut 0 on: def is "-1". */
        size_t last = 0;
        for (const torch::jit::Use &u : v->uses())
            last = std::max(last, index_of(u.user));
        count[0]++;
        count[last + 1]--;
        live_from[0].emplace_back(v, last);
    }
    for (size_t i = 0; i < N; i++)
        for (Value *o : c.nodes[i]->outputs())
            if (!free(o))
                add(o, i);
    c.cross.assign(N + 1, nullptr);
    c.single.assign(N + 1, false);
    int live = 0;
    std::vector<std::pair<Value *, size_t>> open;
    for (size_t k = 0; k <= N; k++) {
        live += count[k];
        for (auto &p : live_from[k])
            open.push_back(p);
        if (live != 1)
            continue;
        /* The values dead by now go (each once), leaving the live one. */
        open.erase(
            std::remove_if(open.begin(), open.end(),
                           [k](const std::pair<Value *, size_t> &p) { return p.second < k; }),
            open.end());
        Value *v = open.size() == 1 ? open[0].first : nullptr;
        if (v == nullptr || !v->type()->cast<c10::TensorType>())
            continue;
        c.single[k] = true;
        bool written = false;
        if (k > 0 && k < N)
            for (const torch::jit::Use &u : v->uses())
                if (index_of(u.user) >= k && writes(u, 0, Known()))
                    written = true;
        if (!written)
            c.cross[k] = v;
    }
    return c;
}

/* Inlines every top-level call to a function or to a method other than a
 * forward: the model's own code, as its author wrote it. */
void inline_helpers(Graph &g)
{
    for (bool again = true; again;) {
        again = false;
        std::vector<Node *> calls;
        for (Node *n : g.nodes())
            if ((n->kind() == c10::prim::CallFunction ||
                 (n->kind() == c10::prim::CallMethod && !is_forward_call(n))) &&
                callee(n) != nullptr)
                calls.push_back(n);
        for (Node *n : calls) {
            torch::jit::GraphFunction *f = callee(n);
            /* A function's input 0 is the function itself (as the
             * Inline pass does it). */
            if (n->kind() == c10::prim::CallFunction)
                n->removeInput(0);
            torch::jit::inlineCallTo(n, f, f->graph().get());
            again = true;
        }
        if ((size_t)std::distance(g.nodes().begin(), g.nodes().end()) > MAX_NODES)
            break;
    }
}

class Finder
{
  public:
    /* Whether f's graph (its helpers inlined) has a cut inside it. */
    bool has_inner_cut(torch::jit::GraphFunction *f)
    {
        auto it = memo_.find(f);
        if (it != memo_.end())
            return it->second;
        memo_[f] = false; /* TorchScript has no recursion; a guard anyway */
        std::shared_ptr<Graph> g = f->graph()->copy();
        bool r = false;
        if (g->inputs().size() == 2) {
            inline_helpers(*g);
            Cuts c = find_cuts(*g);
            for (size_t k = 1; k < c.nodes.size(); k++)
                r = r || c.cross[k] != nullptr;
        }
        memo_[f] = r;
        return r;
    }

  private:
    std::unordered_map<torch::jit::GraphFunction *, bool> memo_;
};

/* "layer1.0" for the module a value holds, read from self by attributes;
 * "" for self, "?" for a module got otherwise. */
std::string path_of(Value *v, Value *self)
{
    if (v == self)
        return "";
    Node *n = v->node();
    if (n->kind() != c10::prim::GetAttr)
        return "?";
    std::string base = path_of(n->input(0), self);
    return (base.empty() ? "" : base + ".") + n->s(c10::attr::name);
}

std::string class_of(Value *v)
{
    auto cls = v->type()->cast<c10::ClassType>();
    return cls && cls->name() ? cls->name()->name() : "module";
}

/* Whether a node makes no new tensor: views of its inputs, values that
 * are not tensors (a flatten, a size, a check that raises); a stage of
 * such nodes joins the next. */
bool only_views(Node *n)
{
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction)
        return false;
    const c10::FunctionSchema *s = n->maybeSchema();
    for (size_t j = 0; j < n->outputs().size(); j++) {
        if (!n->output(j)->type()->cast<c10::TensorType>())
            continue;
        if (s == nullptr || j >= s->returns().size() || s->returns()[j].alias_info() == nullptr)
            return false;
    }
    for (torch::jit::Block *b : n->blocks())
        for (Node *m : b->nodes())
            if (!only_views(m))
                return false;
    return true;
}

/* The first aten operator that computes in n, its blocks included
 * ("cat", "adaptive_avg_pool2d"): a stage's name when it calls no module. */
std::string first_op(Node *n)
{
    if (n->kind().is_aten() && !only_views(n))
        return n->kind().toUnqualString();
    for (torch::jit::Block *b : n->blocks())
        for (Node *m : b->nodes()) {
            std::string k = first_op(m);
            if (!k.empty())
                return k;
        }
    return "";
}

/* The parameters and buffers a stage's graph reaches: a tensor attribute
 * it reads, and everything under a module it does more with than read
 * attributes of (calls it). */
void collect(Graph &g, const c10::IValue &root, GraphStage &st)
{
    std::unordered_map<Value *, c10::IValue> val;
    val[g.inputs()[0]] = root;
    std::unordered_set<const void *> seen;
    auto keep = [&](const at::Tensor &t, std::vector<at::Tensor> &into) {
        if (t.defined() && seen.insert(t.unsafeGetTensorImpl()).second)
            into.push_back(t);
    };
    auto whole = [&](const c10::IValue &m) {
        if (!m.isObject())
            return;
        torch::jit::Module mod(m.toObject());
        for (const at::Tensor &p : mod.parameters())
            keep(p, st.params);
        for (const at::Tensor &b : mod.buffers())
            keep(b, st.buffers);
    };
    std::function<void(torch::jit::Block *)> walk = [&](torch::jit::Block *b) {
        for (Node *n : b->nodes()) {
            if (n->kind() == c10::prim::GetAttr) {
                auto it = val.find(n->input(0));
                if (it == val.end() || !it->second.isObject())
                    continue;
                c10::intrusive_ptr<c10::ivalue::Object> obj = it->second.toObject();
                c10::ClassTypePtr cls = obj->type();
                auto slot = cls->findAttributeSlot(n->s(c10::attr::name));
                if (!slot)
                    continue;
                c10::IValue v = obj->getSlot(*slot);
                val[n->output()] = v;
                if (v.isTensor()) {
                    keep(v.toTensor(), cls->is_parameter(*slot) ? st.params : st.buffers);
                } else if (v.isObject()) {
                    for (const torch::jit::Use &u : n->output()->uses())
                        if (u.user->kind() != c10::prim::GetAttr) {
                            whole(v);
                            break;
                        }
                }
            }
            for (torch::jit::Block *sub : n->blocks())
                walk(sub);
        }
    };
    walk(g.block());
}

/* "blocks.0.ln1..attn": the first and last call of a run, their common
 * path said once. */
std::string run_name(const std::string &a, const std::string &b)
{
    size_t common = 0;
    for (size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; i++)
        if (a[i] == '.')
            common = i + 1;
    return a + ".." + b.substr(common);
}

} // namespace

std::vector<GraphStage> discover_stages(const torch::jit::Module &root)
{
    torch::jit::Module mod = root;
    torch::jit::GraphFunction &fwd =
        torch::jit::toGraphFunction(mod.get_method("forward").function());
    std::shared_ptr<Graph> g = fwd.graph()->copy();
    /* A forward with more arguments (defaulted ones: the schema check let
     * it through) is not cut: its children are its stages, as before. */
    if (g->inputs().size() != 2)
        return {};
    Value *self = g->inputs()[0];
    inline_helpers(*g);

    /* A chain of the top-level children in order: they are the stages. */
    {
        Cuts c = find_cuts(*g);
        std::vector<std::string> kids;
        for (const auto &k : mod.named_children())
            kids.push_back(k.name);
        bool chain = c.nodes.size() == kids.size() && !kids.empty();
        for (size_t i = 0; chain && i < c.nodes.size(); i++) {
            Node *n = c.nodes[i];
            chain = is_forward_call(n) && n->inputs().size() == 2 &&
                    path_of(n->input(0), self) == kids[i] &&
                    n->input(1) == (i == 0 ? g->inputs()[1] : c.nodes[i - 1]->output()) &&
                    c.single[i + 1];
        }
        if (chain && g->outputs().size() == 1 && g->outputs()[0] == c.nodes.back()->output())
            return {};
    }

    /* A submodule's forward whose graph has a cut inside: inlined, one
     * level at a time. */
    Finder finder;
    for (bool again = true; again;) {
        again = false;
        size_t count = std::distance(g->nodes().begin(), g->nodes().end());
        if (count > MAX_NODES)
            break;
        std::vector<Node *> calls;
        for (Node *n : g->nodes())
            if (is_forward_call(n) && n->input(0) != self && has_submodules(n)) {
                torch::jit::GraphFunction *f = callee(n);
                if (f != nullptr && finder.has_inner_cut(f))
                    calls.push_back(n);
            }
        /* The callee's own graph, one level: the two-argument form would
         * inline its optimised graph, every call in it already inlined. */
        for (Node *n : calls) {
            torch::jit::GraphFunction *f = callee(n);
            torch::jit::inlineCallTo(n, f, f->graph().get());
        }
        if (!calls.empty()) {
            inline_helpers(*g);
            again = true;
        }
    }

    Cuts c = find_cuts(*g);
    size_t N = c.nodes.size();
    if (N == 0)
        throw Failure("the model: forward computes nothing (it returns its input or a constant)");
    std::vector<size_t> kept;
    for (size_t k = 0; k <= N; k++)
        if (k == 0 || k == N || c.cross[k] != nullptr)
            kept.push_back(k);
    /* A run of views only joins the next stage (the last, the one before). */
    for (size_t s = 0; s + 1 < kept.size() && kept.size() > 2;) {
        bool views = true;
        for (size_t i = kept[s]; i < kept[s + 1]; i++)
            views = views && only_views(c.nodes[i]);
        if (!views) {
            s++;
            continue;
        }
        kept.erase(kept.begin() + (s + 2 < kept.size() ? s + 1 : s));
    }

    Value *input = g->inputs()[1];
    Value *output = g->outputs()[0];
    Free free(self);
    std::vector<GraphStage> stages;
    std::unordered_map<std::string, int> used;
    for (size_t s = 0; s + 1 < kept.size(); s++) {
        size_t a = kept[s], b = kept[s + 1];
        GraphStage st;
        auto sg = std::make_shared<Graph>();
        Value *gself = sg->addInput("self")->setType(self->type());
        Value *gx = sg->addInput("x")->setType(c10::TensorType::get());
        std::unordered_map<Value *, Value *> map;
        map[self] = gself;
        map[a == 0 ? input : c.cross[a]] = gx;
        std::function<Value *(Value *)> ensure = [&](Value *v) -> Value * {
            auto it = map.find(v);
            if (it != map.end())
                return it->second;
            if (!free(v))
                throw Failure("the model: stage " + std::to_string(s + 1) +
                              " of its forward reads a value made outside it (remat's cut of the "
                              "forward graph is wrong here; list the stages in the job)");
            Node *n = v->node();
            Node *cl = sg->insertNode(sg->createClone(n, ensure));
            for (size_t i = 0; i < n->outputs().size(); i++)
                map[n->output(i)] = cl->output(i);
            return map.at(v);
        };
        std::vector<std::string> calls;
        std::string first_kind;
        for (size_t i = a; i < b; i++) {
            Node *n = c.nodes[i];
            Node *cl = sg->insertNode(sg->createClone(n, ensure));
            for (size_t j = 0; j < n->outputs().size(); j++)
                map[n->output(j)] = cl->output(j);
            if (is_forward_call(n)) {
                calls.push_back(path_of(n->input(0), self));
                if (calls.size() == 1)
                    st.type = class_of(n->input(0));
            } else if (first_kind.empty()) {
                first_kind = first_op(n);
            }
        }
        sg->registerOutput(ensure(b == N ? output : c.cross[b]));
        if (calls.size() == 1) {
            st.name = calls[0];
        } else if (calls.size() > 1) {
            st.name = run_name(calls.front(), calls.back());
            st.type = "graph";
        } else {
            st.name = first_kind.empty() ? "forward" : first_kind;
            st.type = "graph";
        }
        if (++used[st.name] > 1)
            st.name += "#" + std::to_string(used[st.name]);
        st.graph = sg;
        collect(*sg, mod._ivalue(), st);
        stages.push_back(std::move(st));
    }
    return stages;
}

} // namespace rw
