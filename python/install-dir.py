"""Prints where `make install` puts the remat package for this interpreter
under a prefix (argv[1]): a directory that interpreter imports from when the
prefix is one of its own.

sysconfig's default answer is wrong on Debian: its posix_local scheme is
written for base=/usr and maps it to /usr/local, so base=/usr/local gives
/usr/local/local/lib/python3.X/dist-packages, which nothing searches.  Debian's
python3 imports from /usr/local/lib/python3.X/dist-packages (prefix
/usr/local) and /usr/lib/python3/dist-packages (prefix /usr, deb_system).
"""
import os
import sys
import sysconfig


def install_dir(prefix):
    prefix = os.path.normpath(prefix)
    schemes = sysconfig.get_scheme_names()
    at = {"base": prefix, "platbase": prefix, "installed_base": prefix,
          "installed_platbase": prefix}
    if "deb_system" in schemes and prefix == "/usr":
        return sysconfig.get_path("purelib", "deb_system", vars=at)
    if "posix_local" in schemes:
        # Debian's python3: /usr/local/lib/python3.X/dist-packages, with
        # /usr/local replaced by the prefix.
        local = sysconfig.get_path("purelib", "posix_local",
                                   vars={"base": "/usr", "platbase": "/usr"})
        if local.startswith("/usr/local/"):
            return prefix + local[len("/usr/local"):]
    if prefix == os.path.normpath(sys.prefix):
        # The interpreter's own prefix (a venv, pyenv's tree): its own
        # site-packages, as pip would choose.
        return sysconfig.get_path("purelib")
    scheme = "posix_prefix" if "posix_prefix" in schemes else sysconfig.get_default_scheme()
    return sysconfig.get_path("purelib", scheme, vars=at)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1]:
        sys.exit("usage: install-dir.py PREFIX")
    print(install_dir(sys.argv[1]))
