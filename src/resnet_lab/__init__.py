"""resnet-lab: a Jupyter-first research workbook for ResNet-50.

Importing the package is cheap: nothing here imports TensorFlow or Keras. Modules that need them import
them inside the functions that do the heavy work, so that bad input is reported before that cost is paid.
"""

__version__ = "0.1.0"
