#!/bin/sh
# As in the upstream image: arguments that start with "-", or a .conf file,
# are redis-server's.
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
  set -- redis-server "$@"
fi
# The upstream image compiles Redis with protected mode off, so that other
# containers reach it without a password; Debian's default is on.
if [ "$1" = redis-server ]; then
  case " $* " in
    *" --protected-mode "*) ;;
    *) set -- "$@" --protected-mode no ;;
  esac
fi
exec "$@"
