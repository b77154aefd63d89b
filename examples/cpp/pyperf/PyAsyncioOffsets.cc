// PyAsyncioOffsets: see PyAsyncioOffsets.h.
#include "PyAsyncioOffsets.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "elf_image.h"
#include "elf_image_cache.h"

namespace ebpf::pyperf {
namespace {

// No TaskObj or thread state is near this big: a larger size means the bytes
// are not the struct PyPerf knows.
constexpr uint64_t kMaxPlausibleSize = 1 << 16;

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// "_asyncio.cpython-314-*.so" files of `dir`, sorted (at most a few).
std::vector<std::string> AsyncioModules(const std::string& dir, int minor) {
  std::vector<std::string> found;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return found;
  const std::string prefix = "_asyncio.cpython-3" + std::to_string(minor);
  while (const dirent* e = readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name.substr(0, prefix.size()) == prefix && name.size() > 3 &&
        name.substr(name.size() - 3) == ".so")
      found.push_back(dir + "/" + std::string(name));
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

Result<AsyncioDebugOffsets> ParseAsyncioDebugOffsets(std::string_view bytes) {
  if (bytes.size() < kAsyncioDebugSize)
    return Status::Error("the " + std::string(kAsyncioDebugSection) + " section is " +
                         std::to_string(bytes.size()) + " bytes, not " +
                         std::to_string(kAsyncioDebugSize));
  // The section is the struct, member by member, in the file's (x86-64's)
  // byte order.
  static_assert(sizeof(AsyncioDebugOffsets) == kAsyncioDebugSize);
  AsyncioDebugOffsets a;
  std::memcpy(&a, bytes.data(), sizeof(a));
  const bool task_ok = a.task_size <= kMaxPlausibleSize && a.task_name + 8 <= a.task_size &&
                       a.task_awaited_by + 8 <= a.task_size && a.task_is_task < a.task_size &&
                       a.task_awaited_by_is_set < a.task_size && a.task_coro + 8 <= a.task_size;
  const bool tstate_ok = a.tstate_size <= kMaxPlausibleSize && a.tstate_running_task > 0 &&
                         a.tstate_running_task + 8 <= a.tstate_size;
  if (!task_ok || !tstate_ok)
    return Status::Error("the " + std::string(kAsyncioDebugSection) +
                         " section's offsets lie outside their structs");
  return a;
}

std::vector<std::string> AsyncioDebugCandidates(const PythonProcessInfo& info) {
  std::vector<std::string> files = {info.module.host_path};
  if (info.module.deleted) return files;  // a map_files path: no directory to look in
  const std::string dir = DirName(info.module.host_path);
  const std::string lib = "/python" + std::to_string(info.version.major) + "." +
                          std::to_string(info.version.minor) + "/lib-dynload";
  // bin/python3.X -> lib/python3.X/lib-dynload; lib/libpython3.X.so -> the same.
  for (const std::string& d :
       {DirName(dir) + "/lib" + lib, dir + lib, DirName(dir) + "/lib64" + lib}) {
    for (std::string& f : AsyncioModules(d, info.version.minor)) files.push_back(std::move(f));
  }
  return files;
}

Result<AsyncioDebugOffsets> FindAsyncioDebugOffsets(const PythonProcessInfo& info) {
  if (info.version.major != 3 || info.version.minor < 14)
    return Status::Error("CPython " + info.version.ToString() + " keeps no asyncio task state");
  for (const std::string& path : AsyncioDebugCandidates(info)) {
    auto image = ElfImageCache::Shared().GetPath(path);
    if (!image.ok()) continue;
    Elf_Scn* section = (*image)->FindSection(kAsyncioDebugSection);
    if (!section) continue;
    return ParseAsyncioDebugOffsets((*image)->SectionBytes(section));
  }
  return Status::Error("no " + std::string(kAsyncioDebugSection) + " section in " +
                       info.module.path + " or its lib-dynload/_asyncio module");
}

Result<pyperf_offsets> WithAsyncioOffsets(const pyperf_offsets& o,
                                          const AsyncioDebugOffsets& asyncio,
                                          const DebugOffsets& debug) {
  auto get = [&](const char* path) { return debug.Get(path); };
  const auto gi_iframe = get("gen_object.gi_iframe"), tp_flags = get("type_object.tp_flags"),
             lv_tag = get("long_object.lv_tag"), ob_digit = get("long_object.ob_digit"),
             table = get("set_object.table"), mask = get("set_object.mask");
  if (!gi_iframe || !tp_flags || !lv_tag || !ob_digit || !table || !mask)
    return Status::Error("its _Py_DebugOffsets lack the generator, type, int or set fields");
  for (uint64_t v : {*gi_iframe, *tp_flags, *lv_tag, *ob_digit, *table, *mask})
    if (v >= kMaxPlausibleSize) return Status::Error("implausible _Py_DebugOffsets");
  pyperf_offsets out = o;
  out.tstate_running_task = static_cast<pp_s64>(asyncio.tstate_running_task);
  out.task_name = static_cast<pp_s64>(asyncio.task_name);
  out.task_awaited_by = static_cast<pp_s64>(asyncio.task_awaited_by);
  out.task_is_task = static_cast<pp_s64>(asyncio.task_is_task);
  out.task_awaited_by_is_set = static_cast<pp_s64>(asyncio.task_awaited_by_is_set);
  out.task_coro = static_cast<pp_s64>(asyncio.task_coro);
  out.gen_iframe = static_cast<pp_s64>(*gi_iframe);
  out.type_flags = static_cast<pp_s64>(*tp_flags);
  out.long_tag = static_cast<pp_s64>(*lv_tag);
  out.long_digits = static_cast<pp_s64>(*ob_digit);
  out.set_table = static_cast<pp_s64>(*table);
  out.set_mask = static_cast<pp_s64>(*mask);
  return out;
}

}  // namespace ebpf::pyperf
