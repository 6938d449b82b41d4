# Sourced by the image scripts: the pieces of a root filesystem built from this host's own files, for images made
# with `docker import` where no registry is reachable.

# rootfs_binary ROOT SOURCE DEST: SOURCE copied to ROOT/DEST (debug info stripped), with every shared library it
# loads, the dynamic loader among them, at its own path.
rootfs_binary() {
  local root="$1" source="$2" dest="$3"
  mkdir -p "$root/$(dirname "$dest")"
  strip --strip-debug -o "$root/$dest" "$source"
  ldd "$source" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r library; do
    cp --parents -L -n "$library" "$root/"
  done
}
