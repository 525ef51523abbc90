"""An op conformance kit a backend team takes home: one case per distinct op signature of a model's step, in
StableHLO, HLO or ONNX, with the inputs the op really receives on real photographs and its reference and float64
outputs (:mod:`resnet_lab.conformance.build`, the format and tolerance rule in :mod:`resnet_lab.conformance.kit`); a
runner for each engine (:mod:`resnet_lab.conformance.run`); and bisection of a whole-model divergence to the first
layer that leaves tolerance (:mod:`resnet_lab.conformance.bisect`)."""
