#include "npuscope/gui/memory_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/units.h"

namespace npuscope::gui {

namespace {

QString bytesText(int64_t b) { return formatBytes(b < 0 ? 0 : b); }

QTableWidgetItem* readOnlyCell(const QString& text, bool number = false) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

QTableWidget* table(QWidget* parent, const QStringList& headers) {
  auto* t = new QTableWidget(parent);
  t->setColumnCount(headers.size());
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->setVisible(false);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->horizontalHeader()->setStretchLastSection(true);
  return t;
}

}  // namespace

QColor memoryCategoryColor(int category) {
  static const QColor kColors[kMemoryCategoryCount] = {
      QColor(0xb0, 0xb0, 0xb0),  // untagged
      QColor(0x4e, 0x79, 0xa7),  // parameter
      QColor(0x9c, 0x75, 0x5f),  // master_weight
      QColor(0xf2, 0x8e, 0x2b),  // gradient
      QColor(0xb0, 0x7a, 0xa1),  // optimizer_state
      QColor(0x59, 0xa1, 0x4f),  // activation
      QColor(0xed, 0xc9, 0x48),  // cast_cache
      QColor(0x76, 0xb7, 0xb2),  // temporary
      QColor(0xff, 0x9d, 0xa7),  // dump_staging
      QColor(0xba, 0xb0, 0xac),  // other
  };
  return category >= 0 && category < kMemoryCategoryCount ? kColors[category] : kColors[0];
}

CategoryBar::CategoryBar(QWidget* parent) : QWidget(parent) { setMinimumHeight(sizeHint().height()); }

QSize CategoryBar::sizeHint() const { return QSize(600, 2 * fontMetrics().height() + 26); }

void CategoryBar::setLiveSet(const LiveSet& live) {
  std::copy(std::begin(live.bytes), std::end(live.bytes), std::begin(bytes_));
  total_ = live.allocated;
  update();
}

void CategoryBar::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QFontMetrics fm = fontMetrics();
  const int bar_h = fm.height() + 6;
  const QRect bar(4, 4, width() - 8, bar_h);
  p.fillRect(bar, palette().base());
  if (total_ <= 0) return;
  double x = bar.left();
  int legend_x = 4;
  const int legend_y = bar.bottom() + 8;
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    if (bytes_[c] <= 0) continue;
    const double w = static_cast<double>(bar.width()) * static_cast<double>(bytes_[c]) / static_cast<double>(total_);
    const QRectF r(x, bar.top(), w, bar.height());
    p.fillRect(r, memoryCategoryColor(c));
    const QString label = QString::fromLatin1(memoryCategoryName(c));
    if (fm.horizontalAdvance(label) + 6 < w) p.drawText(r, Qt::AlignCenter, label);
    x += w;
    // Legend: a swatch, the name and the share.
    const QString entry = QString("%1 %2 (%3%)")
                              .arg(label, bytesText(bytes_[c]))
                              .arg(100.0 * static_cast<double>(bytes_[c]) / static_cast<double>(total_), 0, 'f', 1);
    p.fillRect(QRect(legend_x, legend_y + 2, 10, fm.height() - 4), memoryCategoryColor(c));
    p.drawText(legend_x + 14, legend_y + fm.ascent(), entry);
    legend_x += 14 + fm.horizontalAdvance(entry) + 16;
  }
  p.setPen(palette().text().color());
  p.drawRect(bar.adjusted(0, 0, -1, -1));
}

MemoryView::MemoryView(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  device_ = new QComboBox(this);
  bar_ = new CategoryBar(this);
  categories_ = table(this, {tr("Category"), tr("Bytes at the peak"), tr("Share")});
  tensors_ = table(this, {tr("Size"), tr("Requested"), tr("Category"), tr("Step"), tr("Owner / allocating op")});
  steps_ = table(this, {tr("Step"), tr("Peak allocated")});
  components_ = table(this, {tr("Component"), tr("Reserved at the highest total"), tr("Own peak")});
  components_label_ = new QLabel(tr("Device memory by component (npu_module_mem)"), this);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Device:"), this));
  top->addWidget(device_);
  top->addStretch(1);
  auto* split = new QSplitter(Qt::Horizontal, this);
  auto* left = new QWidget(split);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(new QLabel(tr("At the peak, by category"), left));
  left_layout->addWidget(categories_, 1);
  left_layout->addWidget(new QLabel(tr("Each step's peak"), left));
  left_layout->addWidget(steps_, 2);
  left_layout->addWidget(components_label_);
  left_layout->addWidget(components_, 1);
  auto* right = new QWidget(split);
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(new QLabel(tr("Largest live tensors at the peak (activate one to open its op)"), right));
  right_layout->addWidget(tensors_, 1);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  split->setSizes({760, 840});
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(summary_);
  layout->addWidget(bar_);
  layout->addWidget(split, 1);

  connect(device_, QOverload<int>::of(&QComboBox::currentIndexChanged), this, [this](int i) { showDevice(i); });
  connect(tensors_, &QTableWidget::cellActivated, this, [this](int row, int) {
    const QVariant id = tensors_->item(row, 0)->data(Qt::UserRole);
    if (id.isValid() && id.toLongLong() >= 0) emit opActivated(id.toLongLong());
  });
  connect(doc_, &TraceDocument::runLoaded, this, [this](qint64, bool refreshed) {
    if (!refreshed) refresh();
  });
  refresh();
}

void MemoryView::refresh() {
  devices_.clear();
  step_peaks_.clear();
  device_components_.clear();
  device_->blockSignals(true);
  device_->clear();
  device_->blockSignals(false);
  if (!doc_->reader() || doc_->currentRun() < 0) {
    summary_->setText(tr("Open a trace file and pick a run: its memory by owner appears here."));
    showDevice(-1);
    return;
  }
  TraceReader& r = *doc_->reader();
  const std::vector<MemoryBlockRecord>& blocks = doc_->memoryBlocks();
  auto mem = memoryByDevice(r, doc_->currentRun(), blocks);
  auto components = r.memoryComponents(doc_->currentRun());
  if (components.isOk()) device_components_ = componentPeaks(*components);
  if (!mem.isOk()) {
    summary_->setText(QString::fromStdString(mem.status().message()));
    emit doc_->errorOccurred(QString::fromStdString(mem.status().message()));
    return;
  }
  devices_ = std::move(*mem);
  if (devices_.empty()) {
    summary_->setText(device_components_.empty()
                          ? tr("This run has no memory by owner: record it with memory on (the default of npuscope "
                               "train and npuscope.profile) with npuscope 0.10 or later.")
                          : tr("This run has no memory by owner (its export has no operator_memory.csv); below, "
                               "what each component of the device software reserved."));
    showDevice(-1);
    return;
  }
  auto steps = r.steps(doc_->currentRun());
  for (const DeviceMemory& d : devices_) {
    step_peaks_.push_back(steps.isOk() ? stepPeaks(blocks, d.device, *steps) : std::vector<StepPeak>{});
  }
  device_->blockSignals(true);
  for (const DeviceMemory& d : devices_) device_->addItem(QString("npu:%1").arg(d.device));
  device_->blockSignals(false);
  showDevice(0);
}

void MemoryView::showDevice(int index) {
  categories_->setRowCount(0);
  tensors_->setRowCount(0);
  steps_->setRowCount(0);
  components_->setRowCount(0);
  const DeviceComponents* comp = nullptr;
  const int32_t device = index >= 0 && index < static_cast<int>(devices_.size()) ? devices_[static_cast<size_t>(index)].device : -1;
  for (const DeviceComponents& c : device_components_) {
    if (c.device == device || (device < 0 && !comp)) comp = &c;
  }
  components_label_->setVisible(comp != nullptr);
  components_->setVisible(comp != nullptr);
  if (comp) {
    components_label_->setText(tr("Device memory by component (npu_module_mem): %1 at the highest")
                                   .arg(bytesText(comp->total_peak)));
    components_->setRowCount(static_cast<int>(comp->components.size()));
    for (size_t i = 0; i < comp->components.size(); ++i) {
      const ComponentPeak& c = comp->components[i];
      components_->setItem(static_cast<int>(i), 0, readOnlyCell(QString::fromStdString(c.component)));
      components_->setItem(static_cast<int>(i), 1, readOnlyCell(bytesText(c.at_total_peak), true));
      components_->setItem(static_cast<int>(i), 2, readOnlyCell(bytesText(c.peak), true));
    }
    components_->resizeColumnsToContents();
  }
  if (index < 0 || index >= static_cast<int>(devices_.size())) {
    bar_->setLiveSet(LiveSet());
    return;
  }
  const DeviceMemory& d = devices_[static_cast<size_t>(index)];
  QString text = tr("<b>npu:%1 peak %2</b> in %3 live blocks").arg(d.device).arg(bytesText(d.peak_allocated)).arg(d.at_peak.blocks.size());
  if (d.peak_step >= 0) text += d.peak_in_step ? tr(", step %1").arg(d.peak_step) : tr(", after the recorded steps");
  if (!d.peak_op.empty()) text += tr(", while %1 allocated").arg(QString::fromStdString(d.peak_op).toHtmlEscaped());
  if (d.reserved_at_peak >= 0) {
    text += tr(". Reserved %1: %2 cached but free").arg(bytesText(d.reserved_at_peak)).arg(bytesText(d.reserved_at_peak - d.peak_allocated));
    if (d.largest_cached >= 0) text += tr(" (largest free block %1)").arg(bytesText(d.largest_cached));
  }
  text += ".";
  if (d.pool_peak_allocated > d.peak_allocated) {
    text += tr(" The allocator's own peak was %1 allocated, %2 reserved: these blocks are the part the trace "
               "lists (an export's operator_memory.csv has the ops' allocations while profiling, not what was "
               "allocated before).")
                .arg(bytesText(d.pool_peak_allocated))
                .arg(bytesText(d.peak_reserved));
  }
  for (const DeviceMemory::Oom& o : d.ooms) {
    text += tr("<br><span style='color:#b00'>Out of memory at step %1%2: %3</span>")
                .arg(o.record.step)
                .arg(o.op.empty() ? QString() : tr(" in %1").arg(QString::fromStdString(o.op).toHtmlEscaped()))
                .arg(QString::fromStdString(o.record.message).toHtmlEscaped());
  }
  summary_->setText(text);
  bar_->setLiveSet(d.at_peak);

  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    if (d.at_peak.bytes[c] <= 0) continue;
    const int row = categories_->rowCount();
    categories_->insertRow(row);
    auto* name = readOnlyCell(QString::fromLatin1(memoryCategoryName(c)));
    name->setData(Qt::DecorationRole, memoryCategoryColor(c));
    categories_->setItem(row, 0, name);
    categories_->setItem(row, 1, readOnlyCell(bytesText(d.at_peak.bytes[c]), true));
    categories_->setItem(row, 2, readOnlyCell(QString("%1 %").arg(100.0 * static_cast<double>(d.at_peak.bytes[c]) /
                                                             static_cast<double>(std::max<int64_t>(d.at_peak.allocated, 1)),
                                                         0, 'f', 1),
                                      true));
  }
  categories_->resizeColumnsToContents();

  TraceReader& r = *doc_->reader();
  const size_t shown = std::min<size_t>(d.at_peak.blocks.size(), 200);
  tensors_->setRowCount(static_cast<int>(shown));
  for (size_t i = 0; i < shown; ++i) {
    const MemoryBlockRecord& b = d.at_peak.blocks[i];
    const int row = static_cast<int>(i);
    auto* size = readOnlyCell(bytesText(b.size), true);
    size->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(b.op_id));
    tensors_->setItem(row, 0, size);
    tensors_->setItem(row, 1, readOnlyCell(bytesText(b.requested), true));
    auto* cat = readOnlyCell(QString::fromLatin1(memoryCategoryName(b.category)));
    cat->setData(Qt::DecorationRole, memoryCategoryColor(b.category));
    tensors_->setItem(row, 2, cat);
    tensors_->setItem(row, 3, readOnlyCell(b.step >= 0 ? QString::number(b.step) : QString("-"), true));
    tensors_->setItem(row, 4, readOnlyCell(QString::fromStdString(blockOwnerText(b, r))));
  }
  tensors_->resizeColumnsToContents();

  // Each step's peak, one column per category present in any step.
  const std::vector<StepPeak>& peaks = step_peaks_[static_cast<size_t>(index)];
  std::vector<int> present;
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    for (const StepPeak& p : peaks) {
      if (p.bytes[c] > 0) {
        present.push_back(c);
        break;
      }
    }
  }
  QStringList headers = {tr("Step"), tr("Peak allocated")};
  for (int c : present) headers << QString::fromLatin1(memoryCategoryName(c));
  steps_->setColumnCount(headers.size());
  steps_->setHorizontalHeaderLabels(headers);
  steps_->setRowCount(static_cast<int>(peaks.size()));
  for (size_t i = 0; i < peaks.size(); ++i) {
    const int row = static_cast<int>(i);
    steps_->setItem(row, 0, readOnlyCell(QString::number(peaks[i].step), true));
    steps_->setItem(row, 1, readOnlyCell(bytesText(peaks[i].allocated), true));
    for (size_t k = 0; k < present.size(); ++k) {
      steps_->setItem(row, static_cast<int>(k) + 2, readOnlyCell(bytesText(peaks[i].bytes[present[k]]), true));
    }
  }
  steps_->resizeColumnsToContents();
}

}  // namespace npuscope::gui
