// The Memory tab: memory by owner of the current run (analysis/memory_breakdown.h, the same
// numbers as `npuscope report` and `npuscope memory`). Per device: the peak with its step and op,
// a bar and a table of bytes by category at the peak, the largest live tensors with their owners
// or allocating ops (activating one opens its op on the timeline), fragmentation, refused
// allocations, and each step's peak by category side by side; for an imported torch_npu run, what
// each component of the device software reserved (npu_module_mem.csv).
#pragma once

#include <QColor>
#include <QWidget>
#include <vector>

#include "npuscope/analysis/memory_breakdown.h"

class QComboBox;
class QLabel;
class QTableWidget;

namespace npuscope::gui {

class TraceDocument;

// A category's colour, the same in the Memory tab and the timeline's memory track.
QColor memoryCategoryColor(int category);

// A horizontal bar of a live set's bytes by category, with a legend.
class CategoryBar : public QWidget {
  Q_OBJECT
 public:
  explicit CategoryBar(QWidget* parent = nullptr);
  void setLiveSet(const LiveSet& live);
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  int64_t bytes_[kMemoryCategoryCount] = {};
  int64_t total_ = 0;
};

class MemoryView : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryView(TraceDocument* doc, QWidget* parent = nullptr);
  // Reads the current run's memory by owner again.
  void refresh();
  const std::vector<DeviceMemory>& devices() const { return devices_; }
  QTableWidget* categories() const { return categories_; }
  QTableWidget* tensors() const { return tensors_; }
  QTableWidget* steps() const { return steps_; }
  QTableWidget* components() const { return components_; }
  QLabel* summary() const { return summary_; }

 signals:
  // A tensor's allocating op was activated (op_events id).
  void opActivated(qint64 op_id);

 private:
  void showDevice(int index);

  TraceDocument* doc_;
  QLabel* summary_;
  QComboBox* device_;
  CategoryBar* bar_;
  QTableWidget* categories_;
  QTableWidget* tensors_;
  QTableWidget* steps_;
  QLabel* components_label_;
  QTableWidget* components_;
  std::vector<DeviceMemory> devices_;
  std::vector<DeviceComponents> device_components_;
  std::vector<std::vector<StepPeak>> step_peaks_;  // per device
};

}  // namespace npuscope::gui
