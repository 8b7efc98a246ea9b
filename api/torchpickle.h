/* torchpickle.h - an uploaded module's default stages, read from its
 * archive's data.pkl without running anything.
 *
 * torch.jit.save pickles the module (protocol 2): the root object is made
 * from its class (GLOBAL __torch__.X, NEWOBJ) and given its attributes as
 * one dict (BUILD), in the order of the class type, which is the order of
 * named_children(); a submodule's value is an object of a __torch__ class
 * in turn, a parameter a tensor (BINPERSID), a flag a bool.  So the root
 * dict's keys whose values are __torch__ objects are the top-level
 * children: the stages a profile job runs when it lists none.  The scan
 * follows the pickle machine's stack for the few kinds it needs (strings,
 * objects, classes, marks) and refuses anything it does not know. */
#ifndef REMATD_TORCHPICKLE_H
#define REMATD_TORCHPICKLE_H

#include <jansson.h>
#include <stddef.h>

/* The most data.pkl bytes read, and the most children named. */
#define REMATD_PICKLE_MAX_BYTES ((size_t)16 << 20)
#define REMATD_PICKLE_MAX_CHILDREN 10000

/* The names of the root module's children, in order, as a new JSON array;
 * NULL when the text is not a module pickled as torch.jit.save pickles one
 * (an opcode outside protocol 2's, a root that is not an object built from
 * a dict, past the limits) or on no memory. */
json_t *rematd_pickle_children(const unsigned char *p, size_t n);

#endif
