/*
 * test_graph.cpp - an uploaded module's stages found in its forward graph
 * (worker/graph.cpp) on modules compiled here from TorchScript source
 * (Module::define), with no Python: a forward that is its children in
 * order keeps them, a skip over them is one stage, a flatten joins the
 * next stage, an in-place write keeps its producer with it, a container is
 * opened, each stage reaches only its own submodule's parameters, and the
 * stages run in order give the module's own forward.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/ops/allclose.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../../worker/graph.h"
#include "../../worker/shim_private.h"

namespace
{

int failures = 0;

void check(bool ok, const std::string &what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok)
        failures++;
}

int counter = 0;

/* A leaf: forward is src, a parameter w of 4 ones when weighted. */
torch::jit::Module leaf(const std::string &src, bool weighted = false)
{
    torch::jit::Module m("Leaf" + std::to_string(++counter));
    if (weighted)
        m.register_parameter("w", at::ones({4}), false);
    m.define(src);
    return m;
}

const char *SCALE = "def forward(self, x):\n    return x * 2.0\n";
const char *SHIFT = "def forward(self, x):\n    return x + 1.0\n";
const char *WEIGH = "def forward(self, x):\n    return x * self.w\n";
const char *RELU_ = "def forward(self, x):\n    return x.relu_()\n";

/* A root with the children given, its forward src. */
torch::jit::Module root(const std::vector<std::pair<std::string, torch::jit::Module>> &kids,
                        const std::string &src)
{
    torch::jit::Module m("Root" + std::to_string(++counter));
    for (const auto &k : kids)
        m.register_module(k.first, k.second);
    m.define(src);
    return m;
}

std::vector<std::string> names(const std::vector<rw::GraphStage> &st)
{
    std::vector<std::string> v;
    for (const auto &s : st)
        v.push_back(s.name);
    return v;
}

std::string join(const std::vector<std::string> &v)
{
    std::string r;
    for (const auto &s : v)
        r += (r.empty() ? "" : ", ") + s;
    return "[" + r + "]";
}

void stages_are(const std::string &what, torch::jit::Module m, const std::vector<std::string> &want)
{
    std::vector<rw::GraphStage> st;
    try {
        st = rw::discover_stages(m);
    } catch (const std::exception &e) {
        check(false, what + ": " + e.what());
        return;
    }
    check(names(st) == want, what + ": stages " + join(names(st)) + ", want " + join(want));
    if (st.empty())
        return;
    /* The stages run in order, each a GraphFunction with the module as
     * self, give the module's own forward. */
    at::Tensor x = at::randn({2, 4});
    at::Tensor whole = m.forward({x.clone()}).toTensor();
    at::Tensor y = x.clone();
    for (size_t i = 0; i < st.size(); i++) {
        torch::jit::GraphFunction fn("s" + std::to_string(i), st[i].graph, nullptr);
        torch::jit::Stack s{c10::IValue(m._ivalue()), y};
        fn.run(s);
        y = s.back().toTensor();
    }
    check(at::allclose(whole, y), what + ": the stages in order are the forward");
}

} // namespace

int main()
{
    stages_are("children in order", root({{"a", leaf(SCALE)}, {"b", leaf(SHIFT)}}, R"(
def forward(self, x):
    return self.b.forward(self.a.forward(x))
)"),
               {});
    stages_are("a skip over both children", root({{"a", leaf(SCALE)}, {"b", leaf(SHIFT)}}, R"(
def forward(self, x):
    return self.b.forward(self.a.forward(x)) + x
)"),
               {"a..b"});
    stages_are("a flatten joins the next stage", root({{"a", leaf(SCALE)}, {"b", leaf(SHIFT)}}, R"(
def forward(self, x):
    y = torch.flatten(self.a.forward(x), 1)
    return self.b.forward(y)
)"),
               {"a", "b"});
    stages_are("an in-place write keeps its producer with it",
               root({{"a", leaf(SCALE)}, {"r", leaf(RELU_)}, {"c", leaf(SHIFT)}}, R"(
def forward(self, x):
    y = self.r.forward(self.a.forward(x))
    return self.c.forward(torch.flatten(y, 1))
)"),
               {"a..r", "c"});
    /* A write behind a flag the caller passes as a constant (F.relu's
     * inplace): written only when the flag is true. */
    const char *FLAGGED = R"(
def act(self, x, inplace: bool):
    if inplace:
        return x.relu_()
    return torch.relu(x)

def forward(self, x):
    return self.act(x, FLAG)
)";
    auto flagged = [&](bool on) {
        std::string src = FLAGGED;
        src.replace(src.find("FLAG"), 4, on ? "True" : "False");
        return leaf(src);
    };
    for (bool on : {true, false})
        stages_are(std::string("a relu module with inplace ") + (on ? "on" : "off"),
                   root({{"a", leaf(SCALE)}, {"r", flagged(on)}, {"c", leaf(SHIFT)}}, R"(
def forward(self, x):
    y = self.r.forward(self.a.forward(x))
    return self.c.forward(torch.flatten(y, 1))
)"),
                   on ? std::vector<std::string>{"a..r", "c"}
                      : std::vector<std::string>{"a", "r", "c"});
    torch::jit::Module seq = root({{"s0", leaf(SCALE)}, {"s1", leaf(WEIGH, true)}}, R"(
def forward(self, x):
    return self.s1.forward(self.s0.forward(x))
)");
    torch::jit::Module opened = root({{"seq", seq}, {"head", leaf(SHIFT)}}, R"(
def forward(self, x):
    y = self.seq.forward(x)
    return self.head.forward(torch.flatten(y, 1)) * 3.0
)");
    stages_are("a container with a cut inside is opened", opened,
               {"seq.s0", "seq.s1", "head", "mul"});
    std::vector<rw::GraphStage> st = rw::discover_stages(opened);
    check(st.size() == 4 && st[0].params.empty() && st[1].params.size() == 1 &&
              st[2].params.empty() && st[3].params.empty() && st[1].type.rfind("Leaf", 0) == 0,
          "each stage reaches only its own submodule's parameters");
    stages_are("a helper method is inlined", root({{"a", leaf(SCALE)}, {"b", leaf(SHIFT)}}, R"(
def impl(self, x):
    return self.b.forward(torch.relu(self.a.forward(x)))

def forward(self, x):
    return self.impl(x)
)"),
               {"a", "relu", "b"});
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
