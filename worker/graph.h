/*
 * graph.h - an uploaded TorchScript module's stages found in its forward
 * graph (graph.cpp), as python/remat/_graph.py finds them in a traced fx
 * graph: the graph's top-level nodes in order, cut where one tensor alone
 * crosses, each run of nodes between two cuts a graph of its own.
 */
#ifndef REMAT_WORKER_GRAPH_H
#define REMAT_WORKER_GRAPH_H

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace torch
{
namespace jit
{
struct Graph;
struct Module;
} // namespace jit
} // namespace torch

namespace rw
{

/* One stage: a graph taking (self, x) and returning one tensor, self
 * being the uploaded module itself, so that the weights a stage reads are
 * the module's own; the parameters and buffers its attribute reads reach. */
struct GraphStage {
    std::string name; /* the submodule path, "layer1.0", or "a..b" for a run */
    std::string type; /* the called module's class, or "graph" */
    std::shared_ptr<torch::jit::Graph> graph;
    std::vector<at::Tensor> params, buffers;
};

/* The stages of root's forward.  Calls to the module's own methods and to
 * functions are inlined; a call to a submodule's forward is inlined (one
 * level at a time) when its own graph has a place where one tensor alone
 * crosses, so that a Sequential becomes its members and a residual block
 * stays whole.  A cut is kept where exactly one tensor made before it is
 * read after it (the module itself, its attributes and constants aside:
 * each stage reads them again) and the stage after it does not write
 * that tensor in place (a stage's input is a leaf of its own when
 * measured).  A stage of views only (a flatten) joins the next.  Returns
 * no stage when the forward is a chain of the module's top-level children
 * in order, or takes more than the one tensor (the children are then the
 * stages, as before), and one stage when no cut exists.  Runs nothing of
 * the model; throws a Failure. */
std::vector<GraphStage> discover_stages(const torch::jit::Module &root);

} // namespace rw

#endif
