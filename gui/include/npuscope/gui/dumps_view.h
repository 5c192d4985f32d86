// The Dumps tab: every dumped input/output tensor of the run, per op, with its statistics;
// tensors holding NaN or inf are tinted red and can be shown alone. Selecting one decodes its
// payload (zstd-compressed or raw little-endian fp16 / bf16 / fp32 / fp64 / ints) and draws a
// value histogram with the non-finite counts beside it.
#pragma once

#include <QWidget>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QTableView;

namespace npuscope::gui {

class DumpTableModel;
class TableProxy;
class TraceDocument;

// The elements of a stored dump as doubles; kUnsupported for an unknown dtype.
StatusOr<std::vector<double>> decodeDumpValues(const TensorDumpData& data, const std::string& dtype);

// A value histogram: finite values in `bins` equal bins, NaN and inf counted beside.
class HistogramWidget : public QWidget {
  Q_OBJECT
 public:
  explicit HistogramWidget(QWidget* parent = nullptr);
  void setValues(const std::vector<double>& values, int bins = 48);
  void clear(const QString& message);
  const std::vector<int64_t>& bins() const { return bins_; }
  int64_t nanCount() const { return nan_; }
  int64_t infCount() const { return pinf_ + ninf_; }
  QSize sizeHint() const override { return {420, 220}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::vector<int64_t> bins_;
  double lo_ = 0, hi_ = 0;
  int64_t nan_ = 0, pinf_ = 0, ninf_ = 0, count_ = 0;
  QString message_;
};

class DumpsView : public QWidget {
  Q_OBJECT
 public:
  explicit DumpsView(TraceDocument* doc, QWidget* parent = nullptr);
  DumpTableModel* model() const { return model_; }
  TableProxy* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  HistogramWidget* histogram() const { return hist_; }
  void setOnlyNonFinite(bool on);
  // Shows tensor `row` of the model (source row).
  void showDump(int row);
  // Selects and shows the tensor with this tensor_dumps id, clearing the filters that hide it;
  // false when the run has no such dump.
  bool selectDumpId(int64_t id);
  void refresh();

 private:
  TraceDocument* doc_;
  QLineEdit* filter_;
  QCheckBox* bad_only_;
  QLabel* summary_;
  QTableView* table_;
  DumpTableModel* model_;
  TableProxy* proxy_;
  QLabel* stats_;
  HistogramWidget* hist_;
};

}  // namespace npuscope::gui
