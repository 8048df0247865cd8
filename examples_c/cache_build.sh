# Sourced by examples_c/*/fetch_build.sh: a third-party build cached under
# ${Q4VK_CACHE:-$HOME/.cache/q4vk}, one directory per option set (another checkout's options
# live beside it instead of evicting it), serialized with flock (several checkouts and CI
# jobs share the cache), complete only when its stamp matches, installed by swapping in a
# staged tree so an interrupted build never leaves a half-written install.
#
# The caller sets CACHE_TAG (the log prefix) and CACHE_NICE (the build's nice level), then:
#   cache_open NAME STAMP_CONTENT MARKER FORCE   status 0: a complete install is cached
#   run_logged CMD...                             runs CMD niced, output to $BUILD_LOG
#   cache_install MARKER                          cmake --install $BUILD, swap, drop $BUILD
#   cache_close [NOTE]                            writes the stamp, logs the elapsed time
# cache_open sets ROOT (the cache directory), SRC, BUILD, PREFIX (the install), STAMP and
# BUILD_LOG; MARKER is a file under PREFIX that a complete install has.

CACHE_ROOT=${Q4VK_CACHE:-$HOME/.cache/q4vk}

log() { printf '[%s] %s\n' "$CACHE_TAG" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# sha256_is FILE SHA256: the file exists and has that digest.
sha256_is() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]; }

cache_open() {
  CACHE_STAMP_CONTENT=$2
  ROOT=$CACHE_ROOT/$1-$(sha256sum <<<"$2" | cut -c1-12)
  SRC=$ROOT/src
  BUILD=$ROOT/build
  PREFIX=$ROOT/install
  STAMP=$ROOT/install.stamp
  BUILD_LOG=$ROOT/build.log
  mkdir -p "$ROOT"
  exec 9>"$ROOT/.lock"
  flock 9
  if [[ "$4" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$2" && -f "$PREFIX/$3" ]]; then
    log "cached install: $PREFIX"
    return 0
  fi
  CACHE_START=$SECONDS
  rm -f "$STAMP"
  : >"$BUILD_LOG"
  return 1
}

run_logged() {
  if ! nice -n "$CACHE_NICE" "$@" >>"$BUILD_LOG" 2>&1; then
    tail -n 60 "$BUILD_LOG" >&2
    die "failed: $* (full log: $BUILD_LOG)"
  fi
}

cache_install() {
  local stage=$ROOT/stage
  rm -rf "$stage"
  log "installing to $PREFIX"
  # Install into a DESTDIR stage (paths inside still say $PREFIX), then swap.
  DESTDIR=$stage run_logged cmake --install "$BUILD"
  [[ -f "$stage$PREFIX/$1" ]] || die "install incomplete: no $1"
  rm -rf "$PREFIX"
  mv "$stage$PREFIX" "$PREFIX"
  rm -rf "$stage" "$BUILD"
}

cache_close() {
  printf '%s' "$CACHE_STAMP_CONTENT" >"$STAMP"
  local elapsed=$((SECONDS - CACHE_START))
  log "done in ${elapsed}s ($((elapsed / 60))m$((elapsed % 60))s)${1:+; $1}"
}
