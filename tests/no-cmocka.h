/* no-cmocka.h - included instead of cmocka's flags when configure found no
 * cmocka: the unit tests are make check's only need of it, so the build
 * goes on without it, and make check stops here, naming what to install. */
#error "make check needs cmocka: install libcmocka-dev (Debian), then run configure again"
