#include "npuscope/dumper/dump_export.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "npuscope/store/tensor_data.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/dumper/dump_file.h"

namespace npuscope::dumper {

StatusOr<ExportFormat> parseExportFormat(const std::string& text) {
  if (text == "ascend") return ExportFormat::kAscend;
  if (text == "npy") return ExportFormat::kNpy;
  return invalidArgument("--format: unknown value '" + text + "' (expected ascend or npy)");
}

Status writeNpy(const std::string& path, const std::string& dtype, const std::string& shape_text,
                const std::vector<uint8_t>& data) {
  using tensor::DType;
  DType t = tensor::parseDType(dtype);
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, tensor::parseShape(shape_text));
  const std::vector<uint8_t>* payload = &data;
  std::vector<uint8_t> widened;
  if (t == DType::kBFloat16) {  // numpy has no bfloat16
    widened.resize(data.size() * 2);
    for (size_t i = 0; i < data.size() / 2; ++i) {
      const float f = static_cast<float>(tensor::elementAt(data.data(), t, i));
      std::memcpy(widened.data() + 4 * i, &f, 4);
    }
    payload = &widened;
    t = DType::kFloat32;
  }
  const char* descr = nullptr;
  switch (t) {
    case DType::kFloat32: descr = "<f4"; break;
    case DType::kFloat16: descr = "<f2"; break;
    case DType::kFloat64: descr = "<f8"; break;
    case DType::kInt8: descr = "|i1"; break;
    case DType::kUInt8: descr = "|u1"; break;
    case DType::kInt16: descr = "<i2"; break;
    case DType::kInt32: descr = "<i4"; break;
    case DType::kInt64: descr = "<i8"; break;
    case DType::kBool: descr = "|b1"; break;
    default: return invalidArgument(path + ": cannot export dtype '" + dtype + "' as .npy");
  }
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return ioError(path + ": cannot create: " + std::strerror(errno));
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  const char len_le[2] = {static_cast<char>(hlen & 0xff), static_cast<char>(hlen >> 8)};
  out.write(len_le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(payload->data()), static_cast<std::streamsize>(payload->size()));
  if (!out.flush()) return ioError(path + ": writing: " + std::strerror(errno));
  return Status::ok();
}

StatusOr<size_t> exportDumps(TraceReader& reader, const ExportOptions& options) {
  int64_t run = options.run_id;
  if (run < 0) {
    ASSIGN_OR_RETURN(RunRow latest, reader.latestRun());
    run = latest.id;
  }
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> dumps, reader.tensorDumps(run));
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) return ioError("--out: cannot create " + options.out_dir + ": " + ec.message());

  auto payloadOf = [&](const TensorDumpInfo& d) -> StatusOr<std::vector<uint8_t>> {
    if (d.data_bytes == 0) return std::vector<uint8_t>();
    ASSIGN_OR_RETURN(TensorDumpData stored, reader.tensorDumpData(d.id));
    return tensor::decodeDumpPayload(stored.bytes, stored.zstd_frame);
  };
  auto stepDir = [&](int64_t step) {
    const std::string dir = options.out_dir + "/" + (step < 0 ? std::string("none") : std::to_string(step));
    fs::create_directories(dir, ec);
    return dir;
  };

  size_t files = 0;
  if (options.format == ExportFormat::kNpy) {
    for (const auto& d : dumps) {
      if (options.step && d.step != *options.step) continue;
      ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, payloadOf(d));
      if (d.data_bytes == 0) continue;
      RETURN_IF_ERROR(writeNpy(stepDir(d.step) + "/" + d.op_name + "." + d.argName() + ".npy",
                               d.dtype, d.shape, bytes));
      ++files;
    }
    return files;
  }
  // Ascend: one file per op instance, rows grouped in their dump order.
  size_t i = 0;
  uint64_t task = 0;
  while (i < dumps.size()) {
    size_t j = i;
    while (j < dumps.size() && dumps[j].step == dumps[i].step && dumps[j].op_name == dumps[i].op_name) ++j;
    if (!options.step || dumps[i].step == *options.step) {
      std::vector<std::vector<uint8_t>> payloads;
      std::vector<DumpFileTensor> in, out;
      for (size_t k = i; k < j; ++k) {
        ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, payloadOf(dumps[k]));
        payloads.push_back(std::move(bytes));
      }
      for (size_t k = i; k < j; ++k) {
        const auto& d = dumps[k];
        DumpFileTensor t;
        t.dtype = tensor::parseDType(d.dtype);
        ASSIGN_OR_RETURN(t.shape, tensor::parseShape(d.shape));
        t.format = d.format;
        t.data = payloads[k - i].data();
        t.size = payloads[k - i].size();
        (d.io == "input" ? in : out).push_back(std::move(t));
      }
      const std::string path =
          stepDir(dumps[i].step) + "/" + dumpFileName(dumps[i].op_type, dumps[i].op_name, task, 0, task);
      RETURN_IF_ERROR(writeDumpFile(path, dumps[i].op_name, 0, in, out));
      ++files;
    }
    ++task;
    i = j;
  }
  return files;
}

}  // namespace npuscope::dumper
